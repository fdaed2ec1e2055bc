"""Choose the weight layout by measurement: `x @ W[in, out]` or `F.linear(x, W[out, in])`, per step size.

Which one streams a GEMM faster is a property of the device and its kernels, and it can flip with the
number of rows (tokens in the step): on some CPUs `x @ W[in, out]` is 2x faster for one decode token
and slower for eight. Both are timed at start-up over a range of row counts (bench's side-by-side
numbers decide the one-token case when the profile has them); when the winner flips and memory
allows, both copies are kept and each step uses the faster one.
"""

from __future__ import annotations

import functools
import time

import torch
import torch.nn.functional as F

from bringup.backends.registry import synchronize
from bringup.runner.config import ModelConfig
from bringup.runner.model import WeightLayout
from bringup.runner.plan import Choice
from bringup.runner.profile_facts import ProfileFacts

IN_OUT, OUT_IN = "in_out", "out_in"
ROWS = (1, 2, 4, 8, 16, 32, 64)
MARGIN = 0.9  # a layout wins at a row count when it takes under 90 % of the other's time
SLOW_PASS_S = 0.3  # a pass this slow is measured once, and larger row counts are not timed
STREAM_BYTES = 96 * 2**20  # weight bytes cycled per layout while timing: beyond a typical last-level cache


def choose_layout(facts: ProfileFacts, dtype: torch.dtype, device: torch.device, config: ModelConfig,
                  free_bytes: int | None) -> tuple[WeightLayout, Choice]:
    name = str(dtype).removeprefix("torch.")
    k, n = config.hidden_size, 2 * config.intermediate_size
    budget = STREAM_BYTES if free_bytes is None else min(STREAM_BYTES, free_bytes // 16)
    times = time_layouts(device, dtype, k, n, ROWS, budget)  # cached per process: a property of the device
    ratios = {m: t_matmul / t_linear for m, (t_matmul, t_linear) in times.items()}  # < 1: x@W faster
    notes = [f"x@W÷F.linear time, 1x{k}x{n} {name} weights streamed from memory, by rows: "
             + ", ".join(f"{m}:{r:.2f}" for m, r in ratios.items())]
    bench = facts.linear_vs_matmul_speedup(name)
    if bench is not None:
        ratios[1] = bench[0]  # bench's speed-up of F.linear over x@W is the same time ratio
        notes.append(f"1 row from bench: {bench[0]:.2f} (median of {bench[1]} decode GEMMs)")
    small = _winner(ratios[1]) or OUT_IN
    other = IN_OUT if small == OUT_IN else OUT_IN
    switch = 1
    for m in list(ratios)[1:]:
        if _winner(ratios[m]) == other:
            break
        switch = m
    above = [_winner(ratios[m]) for m in ratios if m > switch]
    large = other if above and above.count(other) > above.count(small) else small
    if large != small:
        extra = linear_weight_bytes(config, dtype)
        if free_bytes is None or free_bytes < 4 * extra:
            notes.append(f"a second copy ({extra / 2**20:.0f} MiB) does not fit comfortably; one layout")
            large = small
        else:
            notes.append(f"both copies kept (+{extra / 2**20:.0f} MiB)")
    layout = WeightLayout(small, large, switch if large != small else 0)
    return layout, Choice(layout.describe(), "; ".join(notes))


def _winner(ratio: float) -> str | None:
    if ratio < MARGIN:
        return IN_OUT
    if ratio > 1 / MARGIN:
        return OUT_IN
    return None


def linear_weight_bytes(config: ModelConfig, dtype: torch.dtype) -> int:
    c = config
    per_layer = c.hidden_size * ((c.num_heads + 2 * c.num_kv_heads) * c.head_dim + c.num_heads * c.head_dim
                                 + 3 * c.intermediate_size)
    elem = torch.empty((), dtype=dtype).element_size()
    return (c.num_layers * per_layer + c.vocab_size * c.hidden_size) * elem


@functools.lru_cache(maxsize=16)
def time_layouts(device: torch.device, dtype: torch.dtype, k: int, n: int, rows: tuple[int, ...],
                 stream_bytes: int = STREAM_BYTES, passes: int = 2) -> dict[int, tuple[float, float]]:
    """Seconds per [rows, k] x [k, n] product for both layouts, cycling through enough weight copies
    (`stream_bytes` per layout) that they come from memory rather than cache, as in a real decode."""
    size = k * n * torch.empty((), dtype=dtype).element_size()
    copies = max(2, min(256, stream_bytes // size))
    w_in_out = [torch.full((k, n), 0.01, dtype=dtype, device=device) for _ in range(copies)]
    w_out_in = [w.t().contiguous() for w in w_in_out]

    def one_pass(fn, weights) -> float:  # type: ignore[no-untyped-def]
        synchronize(device)
        start = time.perf_counter()
        for w in weights:
            fn(w)
        synchronize(device)
        return (time.perf_counter() - start) / len(weights)

    out: dict[int, tuple[float, float]] = {}
    with torch.inference_mode():
        for m in rows:
            x = torch.full((m, k), 0.01, dtype=dtype, device=device)
            best = [float("inf"), float("inf")]
            for p in range(passes + 1):  # alternate the layouts so drifting load hits both alike
                times = [one_pass(lambda w: torch.matmul(x, w), w_in_out),  # noqa: B023
                         one_pass(lambda w: F.linear(x, w), w_out_in)]  # noqa: B023
                slow = max(times) * copies > SLOW_PASS_S
                if p or slow:  # pass 0 only warms up, unless it is slow enough to judge on its own
                    best = [min(b, t) for b, t in zip(best, times)]
                if slow:
                    break
            out[m] = (best[0], best[1])
            if min(best) * copies > SLOW_PASS_S:  # more rows only take longer: enough evidence
                break
    return out
