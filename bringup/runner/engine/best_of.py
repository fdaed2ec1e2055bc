"""The fastest of a few runs of a start-up step, each timed to the device's synchronize: an accelerator's kernels run
after the call returns, so a clock read without it measures the launches."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from bringup.backends.registry import synchronize


def best_of(run: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Seconds of the fastest of `repeats` runs of `run` on `device` (the caller has run it once untimed)."""
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - start)
    return best
