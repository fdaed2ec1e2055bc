"""The model: a readable Llama-family decoder of real `nn.Module`s over a paged KV cache.

Reading order: config/ (the shapes, plain data; loading/hf_config.py reads them from config.json,
config/fields.py types each field) → families/ (architecture → llama.py, qwen2.py, ..., each declaring only what
differs, config.json's fields included) → decoder.py (the shared modules and the forward over flattened tokens) →
attention_layer.py (self-attention over the paged cache) → attention.py (implementations and their op
fallback; attention_kinds.py names them) → rope.py, norm.py → layout_linear.py and linear_kinds.py (how weights
are stored for the fastest kernel) → kv_cache.py → batch_inputs.py (a step as flat tensors) → checkpoint.py
(tensor names, projections fused at load) → loading/loader.py (safetensors only; every file of the directory read
through loading/model_files.py, its jail) or gguf/ (GGUF files) / builtin.py (the offline reference model;
config/builtin.py its shape) → text/ (tokenizer.py and detokenizer.py: text in, text out incrementally;
chat_template.py).
"""
