"""The engine: requests in, tokens out.

Reading order: engine.py (`LLMEngine`; options.py's `EngineOptions`) → startup/ (what `LLMEngine.create` does:
device, then pipeline.py's steps: plan, weights, KV cache, warm-up; decode_timing.py times the plan's candidates on
the served model) → sequence.py (one request's state) → scheduler.py (which sequences run this step, under a token and a
KV-block budget; block_manager.py) → executor.py (the model for one step, with fallbacks; the step's flat tensors
are model/batch_inputs.py's) → sampling.py (next tokens on the device; ../sampling_params.py) → outputs.py (what
the caller gets back).
"""
