"""The engine: requests in, tokens out.

Reading order: engine.py (`LLMEngine`, `EngineOptions`) → sequence.py (one request's state) → scheduler.py
(which sequences run this step, under a token and a KV-block budget; block_manager.py) → batch_inputs.py (a
step as flat tensors) → executor.py (the model for one step, with fallbacks) → sampling.py (next tokens on the
device; sampling_params.py) → outputs.py (what the caller gets back).
"""
