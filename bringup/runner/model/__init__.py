"""The model: a readable Llama-family decoder of real `nn.Module`s over a paged KV cache.

Reading order: config.py (shapes from config.json) → families.py (architecture → llama.py or qwen2.py, each
declaring only what differs) → decoder.py (the shared modules and the forward over flattened tokens) →
attention_layer.py (self-attention over the paged cache) → attention.py (implementations and their op
fallback) → rope.py, norm.py → layout_linear.py and linear_kinds.py (how weights are stored for the fastest
kernel) → kv_cache.py → checkpoint.py (tensor names, projections fused at load) → loader.py (safetensors only;
every file of the directory read through model_files.py, its jail) / builtin.py (the offline reference
model) → tokenizer.py and detokenizer.py (text in, text out incrementally).
"""
