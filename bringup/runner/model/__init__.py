"""The model's forward math: a readable Llama-family decoder of real `nn.Module`s over a paged KV cache.

Reading order: config/ (the shapes, plain data; config/fields.py types each field) → families/ (architecture →
llama.py, qwen2.py, ..., each declaring only what differs, config.json's fields included) → decoder.py (the shared
modules and the forward over flattened tokens) → attention_layer.py (self-attention over the paged cache) →
attention.py (implementations and their op fallback; attention_kinds.py names them) → rope.py, norm.py, moe.py →
kv_cache.py → batch_inputs.py (a step as flat tensors) → checkpoint.py (the checkpoint's tensor names).

Beside it in the runner: weights/ (how each linear weight is stored and applied: kinds, layouts, formats, host
kernels, and the reader that fills the layers), sources/ (where a model comes from: a directory's config.json and
safetensors, a GGUF file, the built-in model) and text/ (tokenizer, detokenizer, chat template).
"""
