"""A short batch-1 serving run through the runner, timed per token: TTFT and the gaps between tokens.

Requests go one after another (one client, batch 1), greedy, each token timed when the engine hands it out —
what a streaming client sees, less the HTTP layer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.options import batch_one_options
from bringup.runner.sampling_params import SamplingParams


@dataclass
class ServingRun:
    model: str
    prompt_tokens: int
    new_tokens: int
    ttft_s: list[float] = field(default_factory=list)         # per request: arrival to first token
    inter_token_s: list[float] = field(default_factory=list)  # every gap between two tokens of a request
    decode_s: list[float] = field(default_factory=list)       # per request: first token to last
    plan: dict[str, str] = field(default_factory=dict)
    fallbacks: dict[str, int] = field(default_factory=dict)


def timed_request(engine: LLMEngine, request_id: str, prompt: list[int], params: SamplingParams) -> list[float]:
    """Seconds from arrival at which each generated token came out."""
    start = time.perf_counter()
    engine.add_request(request_id, prompt, params)
    stamps: list[float] = []
    produced = 0
    while engine.has_unfinished():
        for out in engine.step():
            if out.request_id == request_id and len(out.token_ids) > produced:
                now = time.perf_counter() - start
                stamps.extend([now] * (len(out.token_ids) - produced))
                produced = len(out.token_ids)
    return stamps


def serving_run(device: str, profile_path: Path | None, model_dir: Path | None, requests: int = 8,
                prompt_tokens: int = 64, new_tokens: int = 32, dtype: str | None = None) -> ServingRun:
    """`requests` timed requests after one warm-up request (not counted)."""
    engine = LLMEngine.create(batch_one_options(device, profile_path, model_dir, prompt_tokens + new_tokens + 1, dtype))
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    run = ServingRun(engine.model_name, prompt_tokens, new_tokens)
    for index in range(requests + 1):
        # a different prompt per request, so no request is served from another's cached prefix
        prompt = [(7 * i + 13 * index) % (engine.vocab_size - 1) + 1 for i in range(prompt_tokens)]
        stamps = timed_request(engine, f"serve-{index}", prompt, params)
        if index == 0 or not stamps:
            continue
        run.ttft_s.append(stamps[0])
        run.inter_token_s.extend(b - a for a, b in pairwise(stamps))
        run.decode_s.append(stamps[-1] - stamps[0])
    run.plan = {row[0]: row[1] for row in engine.plan.rows()}
    run.fallbacks = dict(engine.fallbacks.counts)
    return run
