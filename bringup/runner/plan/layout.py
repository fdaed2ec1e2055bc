"""Time the weight layouts, per step size: `x @ W[in, out]`, `F.linear(x, W[out, in])`, and where they run and
match F.linear here, oneDNN's pre-packed weights, column slices, or bringup's host panel kernel (host_kernels.py
chooses from these timings).

Which one streams a GEMM faster is a property of the device and its kernels, and it can flip with the
number of rows (tokens in the step): on some CPUs `x @ W[in, out]` is 2x faster for one decode token
and slower for eight. Both are timed at start-up over a range of row counts (bench's side-by-side
numbers decide the one-token case when the profile has them); when the winner flips and memory
allows, both copies are kept and each step uses the faster one.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

import torch

from bringup.backends.registry import synchronize
from bringup.runner.model.config import ModelConfig, mlp_weight_elements
from bringup.runner.weights.kinds import OUT_IN, PLAIN_KINDS, SLICES
from bringup.runner.weights.registry import apply as linear
from bringup.runner.weights.registry import place

ROWS = (1, 2, 4, 8, 16, 32, 64, 256)
SLOW_PASS_S = 0.3  # a pass this slow is measured once, and larger row counts are not timed
STREAM_BYTES = 96 * 2**20  # at most this many weight bytes cycled per layout while timing: beyond a typical LLC


@dataclass(frozen=True)
class LayoutTimings:
    """Seconds per [rows, k] x [k, n] product of each weight kind timed on the device, by row count; the kinds
    not timed, with why; and how many weight bytes were cycled. Measured at start-up, or given as data."""

    times: dict[int, dict[str, float]]
    skipped: dict[str, str] = field(default_factory=dict)
    stream_bytes: int = STREAM_BYTES
    spreads: dict[int, dict[str, float]] = field(default_factory=dict)  # rows -> kind -> spread across tune's runs


def measure_layouts(dtype: torch.dtype, device: torch.device, config: ModelConfig, free_bytes: int | None,
                    why_not: dict[str, str | None]) -> LayoutTimings:
    """Time every kind that can run here on the shape of the model's MLP input projection: the plain ones and
    slices, and each of `why_not`'s kinds whose reason is None."""
    budget = min(STREAM_BYTES, linear_weight_bytes(config, dtype))  # a small model stays in cache, as it runs
    if free_bytes is not None:
        budget = min(budget, free_bytes // 16)
    kinds = (*PLAIN_KINDS, SLICES, *(kind for kind, why in why_not.items() if why is None))
    times = time_layouts(device, dtype, config.hidden_size, 2 * config.intermediate_size, ROWS, budget, kinds)
    return LayoutTimings(times, {kind: why for kind, why in why_not.items() if why}, budget)


def linear_weight_bytes(config: ModelConfig, dtype: torch.dtype) -> int:
    c = config
    per_layer = c.hidden_size * ((c.num_heads + 2 * c.num_kv_heads) * c.head_dim + c.num_heads * c.head_dim)
    elem = torch.empty((), dtype=dtype).element_size()
    return (c.num_layers * per_layer + mlp_weight_elements(c) + c.vocab_size * c.hidden_size) * elem


@functools.lru_cache(maxsize=16)
def time_layouts(device: torch.device, dtype: torch.dtype, k: int, n: int, rows: tuple[int, ...],
                 stream_bytes: int = STREAM_BYTES, kinds: tuple[str, ...] = PLAIN_KINDS,
                 passes: int = 2) -> dict[int, dict[str, float]]:
    """Seconds per [rows, k] x [k, n] product for each kind, cycling through enough weight copies
    (`stream_bytes` per kind) that they come from memory rather than cache, as in a real decode."""
    size = k * n * torch.empty((), dtype=dtype).element_size()
    copies = max(2, min(256, stream_bytes // size))
    out_in = [torch.full((n, k), 0.01, dtype=dtype, device=device) for _ in range(copies)]
    weights = {kind: [place(w, kind) for w in out_in] if kind != OUT_IN else out_in for kind in kinds}

    def one_pass(x: torch.Tensor, kind: str) -> float:
        synchronize(device)
        start = time.perf_counter()
        for w in weights[kind]:
            linear(x, w, None, kind)
        synchronize(device)
        return (time.perf_counter() - start) / copies

    out: dict[int, dict[str, float]] = {}
    with torch.inference_mode():
        for m in rows:
            x = torch.full((m, k), 0.01, dtype=dtype, device=device)
            best = dict.fromkeys(kinds, float("inf"))
            for p in range(passes + 1):  # alternate the kinds so drifting load hits them alike
                times = {kind: one_pass(x, kind) for kind in kinds}
                slow = max(times.values()) * copies > SLOW_PASS_S
                if p or slow:  # pass 0 only warms up, unless it is slow enough to judge on its own
                    best = {kind: min(best[kind], t) for kind, t in times.items()}
                if slow:
                    break
            out[m] = best
            if min(best.values()) * copies > SLOW_PASS_S:  # more rows only take longer: enough evidence
                break
    return out
