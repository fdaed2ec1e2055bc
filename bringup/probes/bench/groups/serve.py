"""serve: the LLM speed card — batch-1 decode and prefill tokens/s, TTFT and inter-token p50/p90/p99 over a short
serving run of the built-in model (or --model), each with its spread and its samples (bounded) kept."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import not_measured, short_error
from bringup.probes.bench.stats import quantile, summarize
from bringup.profiles.sections.bench import BenchGroup, BenchRecord
from bringup.profiles.store import render_yaml

MAX_SAMPLES = 256  # per record: enough to draw a distribution, small enough for a readable profile
PROMPT_TOKENS = 64


def bounded(samples: list[float], limit: int = MAX_SAMPLES) -> list[float]:
    """At most `limit` samples, taken evenly across the run (so a long run keeps its shape), rounded to 0.1 µs."""
    if len(samples) > limit:
        samples = [samples[i * len(samples) // limit] for i in range(limit)]
    return [round(s, 7) for s in samples]


def latency_record(key: str, name: str, samples: list[float], params: dict) -> BenchRecord:
    """A latency distribution: median_s is p50, the spread its IQR, params hold p90/p99 and the samples."""
    stats, ordered = summarize(samples), sorted(samples)
    return BenchRecord(key=key, name=name, median_s=stats.median, iqr_s=stats.iqr, min_s=stats.min,
                       reps=stats.count, stop="serving_run",
                       params={**params, "p50_s": stats.median, "p90_s": quantile(ordered, 0.9),
                               "p99_s": quantile(ordered, 0.99), "samples_s": bounded(samples)})


def rate_record(key: str, name: str, tokens: int, seconds: list[float], params: dict) -> BenchRecord:
    """Tokens/s per request; median_s is the median seconds per token, the samples tokens/s of each request."""
    rates = [tokens / s for s in seconds if s > 0]
    stats = summarize([s / tokens for s in seconds])
    return BenchRecord(key=key, name=name, median_s=stats.median, iqr_s=stats.iqr, min_s=stats.min,
                       reps=stats.count, stop="serving_run",
                       params={**params, "tokens_per_s": round(1.0 / stats.median, 2), "tokens": tokens,
                               "samples_tokens_per_s": bounded(rates)})


def measure(ctx: BenchContext, requests: int, new_tokens: int):
    from bringup.runner.serving_latency import serving_run  # the runner, planned from this very profile

    with tempfile.TemporaryDirectory(prefix="bringup-serve-") as tmp:
        profile_path = None
        if ctx.profile is not None:
            profile_path = Path(tmp) / "profile.yaml"
            profile_path.write_text(render_yaml(ctx.profile), encoding="utf-8")
        return serving_run(str(ctx.device), profile_path, ctx.model_dir, requests=requests,
                           prompt_tokens=PROMPT_TOKENS, new_tokens=new_tokens, dtype=ctx.e2e_dtype)


def run(ctx: BenchContext) -> BenchGroup:
    requests, new_tokens = (8, 16) if ctx.preset.name == "quick" else (16, 32)
    ctx.on_step(f"serve: {requests} batch-1 requests")
    try:
        result = measure(ctx, requests, new_tokens)
    except Exception as exc:
        return BenchGroup(records=[not_measured("decode_b1", "decode", "error", short_error(exc))])
    common = {"model": result.model, "batch": 1, "requests": requests, "prompt_tokens": PROMPT_TOKENS,
              "new_tokens": new_tokens, "plan": result.plan, "fallbacks": result.fallbacks}
    records = [
        rate_record("decode_b1", "decode", new_tokens - 1, result.decode_s, common),
        rate_record("prefill_b1", "prefill", PROMPT_TOKENS, result.ttft_s, common),
        latency_record("ttft", "time to first token", result.ttft_s, common),
        latency_record("inter_token", "inter-token latency", result.inter_token_s, common),
    ]
    note = (f"{result.model}: {requests} requests one after another (batch 1) after a warm-up, {PROMPT_TOKENS} "
            f"prompt + {new_tokens} new tokens each, greedy, timed as the engine hands each token out (no HTTP); "
            f"prefill tokens/s counts the prompt over the time to first token")
    return BenchGroup(records=records, notes=[note])
