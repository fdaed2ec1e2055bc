"""Choose the weight layout by measurement: `x @ W[in, out]` or `F.linear(x, W[out, in])`.

Which one streams a batch-1 GEMV faster is a property of the device and its kernels, so the plan
takes bench's side-by-side numbers when the profile has them and otherwise times both at start-up.
"""

from __future__ import annotations

import time
from statistics import median

import torch
import torch.nn.functional as F

from bringup.backends.registry import synchronize
from bringup.runner.config import ModelConfig
from bringup.runner.plan import Choice
from bringup.runner.profile_facts import ProfileFacts

IN_OUT, OUT_IN = "in_out", "out_in"


def choose_layout(facts: ProfileFacts, dtype: torch.dtype, device: torch.device, config: ModelConfig) -> Choice:
    name = str(dtype).removeprefix("torch.")
    bench = facts.linear_vs_matmul_speedup(name)
    if bench is not None:
        speedup, count = bench
        value = OUT_IN if speedup > 1.0 else IN_OUT
        return Choice(value, f"bench matmul: F.linear[out,in] at {speedup:.2f}x of x@W[in,out] "
                             f"(median of {count} decode GEMMs, {name})")
    k, n = config.hidden_size, 2 * config.intermediate_size
    t_matmul, t_linear = time_layouts(device, dtype, k, n)
    value = IN_OUT if t_matmul < t_linear else OUT_IN
    return Choice(value, f"measured at start-up, 1x{k}x{n} {name}: x@W[in,out] {t_matmul * 1e6:.0f} us, "
                         f"F.linear[out,in] {t_linear * 1e6:.0f} us (no bench numbers in the profile)")


def time_layouts(device: torch.device, dtype: torch.dtype, k: int, n: int, reps: int = 15) -> tuple[float, float]:
    """Median seconds per call of both layouts for a [1, k] x [k, n] product."""
    x = torch.randn(1, k, device=device).to(dtype)
    w_in_out = torch.randn(k, n, device=device).to(dtype)
    w_out_in = w_in_out.t().contiguous()

    def timed(fn) -> float:  # type: ignore[no-untyped-def]
        samples = []
        for i in range(reps + 3):
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            if i >= 3:
                samples.append(time.perf_counter() - start)
        return median(samples)

    with torch.inference_mode():
        t_linear = timed(lambda: F.linear(x, w_out_in))
        t_matmul = timed(lambda: torch.matmul(x, w_in_out))
    return t_matmul, t_linear
