"""e2e: the runner's own prefill and decode tokens/s on the built-in model, with the plan this profile gives."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import not_measured, set_speedup, short_error
from bringup.profiles.schema import Profile
from bringup.profiles.sections.bench import BenchGroup, BenchRecord
from bringup.profiles.store import render_yaml

PROMPT_TOKENS = 64


def record(key: str, name: str, tokens_per_s: float, tokens: int, result: dict, reps: int) -> BenchRecord:
    return BenchRecord(
        key=key, name=name, dtype=result["plan"].get("dtype"), median_s=1.0 / tokens_per_s, min_s=1.0 / tokens_per_s,
        reps=reps, stop="best_of_reps",
        params={"tokens_per_s": round(tokens_per_s, 2), "tokens": tokens, "model": result["model"],
                "batch": 1, "plan": result["plan"], "fallbacks": result["fallbacks"]},
    )


def measure(ctx: BenchContext, profile: Profile | None, new_tokens: int, reps: int) -> dict:
    from bringup.runner.throughput import measure_throughput  # the runner, planned from this very profile

    with tempfile.TemporaryDirectory(prefix="bringup-e2e-") as tmp:
        profile_path = None
        if profile is not None:
            profile_path = Path(tmp) / "profile.yaml"
            profile_path.write_text(render_yaml(profile), encoding="utf-8")
        return measure_throughput(str(ctx.device), profile_path, prompt_tokens=PROMPT_TOKENS,
                                  new_tokens=new_tokens, reps=reps, dtype=ctx.e2e_dtype)


def without_compiled_checks(profile: Profile) -> Profile:
    """The same profile minus the compiled check's records: the runner then plans eager (the baseline)."""
    return profile.model_copy(update={"compiled": []})


def run(ctx: BenchContext) -> BenchGroup:
    new_tokens, reps = (16, 1) if ctx.preset.name == "quick" else (64, 3)
    ctx.on_step("e2e built-in model")
    try:
        result = measure(ctx, ctx.profile, new_tokens, reps)
    except Exception as exc:
        return BenchGroup(records=[not_measured("decode_b1", "decode", "error", short_error(exc))])
    records = [
        record("prefill_b1", "prefill", result["prefill_tokens_per_s"], PROMPT_TOKENS, result, reps),
        record("decode_b1", "decode", result["decode_tokens_per_s"], new_tokens - 1, result, reps),
    ]
    notes = [f"built-in model, batch 1, {PROMPT_TOKENS} prompt + {new_tokens} new tokens, greedy; best of {reps} "
             f"after a warm-up; median_s is seconds per token; the plan it ran with is in each record's params"]
    if result["plan"].get("compiled", "eager") != "eager" and ctx.profile is not None:
        ctx.on_step("e2e built-in model, eager baseline")
        try:
            eager = measure(ctx, without_compiled_checks(ctx.profile), new_tokens, reps)
        except Exception as exc:
            notes.append(f"eager baseline failed: {short_error(exc)}")
        else:
            for key, name, rate, tokens in (("prefill_b1_eager", "prefill", "prefill_tokens_per_s", PROMPT_TOKENS),
                                            ("decode_b1_eager", "decode", "decode_tokens_per_s", new_tokens - 1)):
                baseline = record(key, name, eager[rate], tokens, eager, reps)
                records.append(baseline)
                planned = next(r for r in records if r.key == key.removesuffix("_eager"))
                set_speedup(planned, baseline)
            notes.append("the plan is compiled: *_eager records are the same run planned eager (baseline); the "
                         "compiled records' speedup is eager time / compiled time")
    return BenchGroup(records=records, notes=notes)
