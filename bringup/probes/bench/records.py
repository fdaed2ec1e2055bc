"""Turn a timing and its work accounting into a profile record."""

from __future__ import annotations

from typing import Any

from bringup.probes.bench.accounting import Work
from bringup.probes.bench.harness import Timing
from bringup.profiles.sections.bench import BenchRecord


def measured(key: str, name: str, timing: Timing, work: Work | None = None, *, dtype: str | None = None,
             params: dict[str, Any] | None = None, **extra: Any) -> BenchRecord:
    """A successful measurement: times per call, and rates when the work is known."""
    record = BenchRecord(
        key=key,
        name=name,
        dtype=dtype,
        params=params or {},
        median_s=timing.median_s,
        iqr_s=timing.iqr_s,
        min_s=timing.min_s,
        reps=timing.reps,
        calls_per_rep=timing.calls_per_rep,
        noisy=timing.noisy,
        stop=timing.stop,
        **extra,
    )
    if work is not None:
        record.flops = work.flops or None
        record.bytes = work.bytes or None
        record.intensity = work.intensity if work.flops else None
        if timing.median_s > 0:
            record.tflops = work.flops / timing.median_s / 1e12 if work.flops else None
            record.gbps = work.bytes / timing.median_s / 1e9 if work.bytes else None
    return record


def not_measured(key: str, name: str, status: str, reason: str, *, dtype: str | None = None,
                 params: dict[str, Any] | None = None) -> BenchRecord:
    """A measurement that was skipped, not applicable, or failed — always with the reason."""
    return BenchRecord(key=key, name=name, dtype=dtype, params=params or {}, status=status, reason=reason)


def set_speedup(alternative: BenchRecord, baseline: BenchRecord) -> None:
    """Mark `alternative` as measured side by side with `baseline`: speedup = baseline / alternative, from their
    fastest repetitions (another process's work only ever adds time, so the floors are what a shared machine cannot
    move; the plan reads these ratios), or their medians where a floor is missing."""
    alternative.baseline_key = baseline.key
    if alternative.min_s and baseline.min_s:
        alternative.speedup = baseline.min_s / alternative.min_s
    elif alternative.median_s and baseline.median_s:
        alternative.speedup = baseline.median_s / alternative.median_s


def short_error(exc: BaseException, limit: int = 200) -> str:
    """One line describing an exception."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:limit]}"
