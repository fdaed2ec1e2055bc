"""Guards that keep a run inside the device's memory and the preset's time per call."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class RateTracker:
    """Remembers the last measured rate (FLOP/s) per dtype to estimate the next call's time."""

    rates: dict[str, float]

    def __init__(self) -> None:
        self.rates = {}

    def note(self, dtype: str, flops: float, seconds: float) -> None:
        if seconds > 0 and flops > 0:
            self.rates[dtype] = flops / seconds

    def estimate_s(self, dtype: str, flops: float) -> float | None:
        rate = self.rates.get(dtype)
        return flops / rate if rate else None


def too_slow_reason(estimate_s: float | None, max_call_s: float) -> str | None:
    """Why a size is skipped for time, or None to measure it."""
    if estimate_s is not None and estimate_s > max_call_s:
        return (f"estimated {estimate_s:.2f} s per call (from the last measured rate) exceeds this preset's "
                f"{max_call_s:g} s per call; run the full preset or a faster device")
    return None


def too_big_reason(nbytes: int, budget: int | None) -> str | None:
    """Why a size is skipped for memory, or None to measure it."""
    if budget is not None and nbytes > budget:
        return (f"needs {nbytes / 2**20:.0f} MiB, over the {budget / 2**20:.0f} MiB one measurement may use "
                "(a share of free device memory)")
    return None
