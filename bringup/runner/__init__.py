"""The bundled inference runner: Llama-family decoders served with a plan derived from the capability profile.

Reading order (each package imports only the ones after it; tests/test_layers.py holds the order):
  engine/  the request lifecycle: engine.py (`LLMEngine`: add, step, abort; options.py) → startup/ (device →
           pipeline.py's steps: draft plan → weights → KV cache → the plan confirmed) → scheduler.py (continuous
           batching over block_manager.py's KV blocks) → executor.py (one step through the model, op and path
           fallbacks) → sampling.py (the next tokens, batched on the device); decode_timing.py times the plan's
           candidates on the served model.
  plan/    what to run: plan.py's `ExecutionPlan`, drafted from the profile (profile_facts.py; no torch), the start-up
           measurements (measurements.py, layout.py), host_kernels.py (every host-kernel choice) and confirm.py
           (the draft's candidates kept or dropped on the served model's timings).
  host/    optional CPU-only kernels (panels linear, paged decode, fused decode layers) and their checks.
  model/   what runs: families/ (llama.py, qwen2.py, ..., each declaring what differs, config.json's fields
           included) over decoder.py's modules (the decoder over a paged KV cache), attention_layer.py and
           attention.py, rope.py, layout_linear.py (weight layouts), directory/loader.py (safetensors), gguf/ or
           builtin.py, text/tokenizer.py and text/detokenizer.py.
sampling_params.py: a request's sampling parameters (the engine's, and the defaults a model's generation config
gives). selftest.py compares the device against float64 on the CPU; throughput.py times a plan end to end.
The HTTP server is bringup/serve/.
"""
