"""The bundled inference runner: a Llama-family decoder planned from the capability profile.

Reading order: engine.py (request lifecycle; `LLMEngine.create` → startup.py) → scheduler.py
(continuous batching over block_manager.py) → executor.py (runs model.py per the plan, op/path
fallbacks; attention.py) → plan.py (every choice with its evidence, read via profile_facts.py;
layout.py and kv_sizing.py decide by measurement). Weights: loader.py (safetensors) or builtin.py;
text: tokenizer.py; sampling.py; selftest.py compares the device against CPU float64.
"""
