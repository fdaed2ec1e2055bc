"""The bundled inference runner: Llama-family decoders served with a plan derived from the capability profile.

Reading order:
  engine/  the request lifecycle: engine.py (`LLMEngine`: add, step, abort) → scheduler.py (continuous
           batching over block_manager.py's KV blocks) → executor.py (one step through the model, op and path
           fallbacks) → sampling.py (the next tokens, batched on the device).
  model/   what runs: families.py (llama.py, qwen2.py) over decoder.py's modules (the decoder over a paged KV
           cache), attention_layer.py and attention.py, rope.py, layout_linear.py (weight layouts), loader.py
           (safetensors) or builtin.py, tokenizer.py and detokenizer.py.
  plan/    what to run: startup.py (device → profile → draft plan → weights → KV cache → confirmation) builds
           plan.py's `ExecutionPlan` once from profile_facts.py and measurements.py, confirm.py checks it on the
           served model; then it is frozen.
  host/    optional CPU-only kernels (panels linear, paged decode) the plan picks only where measured faster.
selftest.py compares the device against float64 on the CPU; throughput.py times a plan end to end.
The HTTP server is bringup/serve/.
"""
