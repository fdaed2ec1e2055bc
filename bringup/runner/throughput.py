"""End-to-end prefill and decode tokens/s of the runner (for `bringup bench`, or anyone timing a plan)."""

from __future__ import annotations

import time
from pathlib import Path

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.options import batch_one_options
from bringup.runner.sampling_params import SamplingParams


def measure_throughput(device: str, profile_path: Path | None = None, model_dir: Path | None = None,
                       prompt_tokens: int = 64, new_tokens: int = 32, reps: int = 3, dtype: str | None = None) -> dict:
    """Batch-1 greedy generation; prefill tokens/s from the first step, decode tokens/s from the rest.

    Best of `reps` runs after one warm-up; the plan the runner used is returned with the numbers.
    """
    engine = LLMEngine.create(batch_one_options(device, profile_path, model_dir, prompt_tokens + new_tokens + 1, dtype))
    prompt = [(7 * i) % (engine.vocab_size - 1) + 1 for i in range(prompt_tokens)]
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    best_prefill = best_decode = 0.0
    for rep in range(reps + 1):
        engine.add_request(f"throughput-{rep}", prompt, params)
        start = time.perf_counter()
        engine.step()
        first = time.perf_counter()
        while engine.has_unfinished():
            engine.step()
        end = time.perf_counter()
        if rep:
            best_prefill = max(best_prefill, prompt_tokens / (first - start))
            best_decode = max(best_decode, (new_tokens - 1) / (end - first))
    return {"model": engine.model_name, "device": engine.plan.device, "prompt_tokens": prompt_tokens,
            "new_tokens": new_tokens, "prefill_tokens_per_s": best_prefill, "decode_tokens_per_s": best_decode,
            "plan": {row[0]: row[1] for row in engine.plan.rows()}, "fallbacks": dict(engine.fallbacks.counts)}
