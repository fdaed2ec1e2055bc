"""The model: a readable Llama-family decoder over a paged KV cache.

Reading order: config.py (shapes from config.json) → decoder.py (the forward over flattened tokens) →
attention.py (implementations and their op fallback) → rope.py → linear_kinds.py (how weights are stored for
the fastest kernel) → kv_cache.py → loader.py (safetensors only) / builtin.py (the offline reference model) →
tokenizer.py and detokenizer.py (text in, text out incrementally).
"""
