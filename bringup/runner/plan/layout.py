"""Choose the weight layout by measurement, per step size: `x @ W[in, out]`, `F.linear(x, W[out, in])`,
and where they run and match F.linear here, oneDNN's pre-packed weights, column slices, or bringup's
host panel kernel.

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
from bringup.runner.host import panels as panel_kernel
from bringup.runner.model.config import ModelConfig, mlp_weight_elements
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.model.linear_kinds import IN_OUT, OUT_IN, PACKED, PANELS, PLAIN_KINDS, SLICES, packed_check, place
from bringup.runner.model.linear_kinds import apply as linear
from bringup.runner.plan.plan import Choice
from bringup.runner.plan.profile_facts import ProfileFacts

__all__ = ["IN_OUT", "OUT_IN", "PACKED", "PANELS", "LayoutTimings", "choose_layout", "measure_layouts", "time_layouts"]
ROWS = (1, 2, 4, 8, 16, 32, 64, 256)
MARGIN = 0.9  # a layout wins at a row count when it takes under 90 % of the other's time
SLOW_PASS_S = 0.3  # a pass this slow is measured once, and larger row counts are not timed
STREAM_BYTES = 96 * 2**20  # at most this many weight bytes cycled per layout while timing: beyond a typical LLC


@dataclass(frozen=True)
class LayoutTimings:
    """Seconds per [rows, k] x [k, n] product of each weight kind timed on the device, by row count; the kinds
    not timed, with why; and how many weight bytes were cycled. Measured at start-up, or given as data."""

    times: dict[int, dict[str, float]]
    skipped: dict[str, str] = field(default_factory=dict)
    stream_bytes: int = STREAM_BYTES


def measure_layouts(dtype: torch.dtype, device: torch.device, config: ModelConfig,
                    free_bytes: int | None) -> LayoutTimings:
    """Time every kind that can run here on the shape of the model's MLP input projection."""
    budget = min(STREAM_BYTES, linear_weight_bytes(config, dtype))  # a small model stays in cache, as it runs
    if free_bytes is not None:
        budget = min(budget, free_bytes // 16)
    why_not = {PACKED: packed_check(device, dtype), PANELS: _panels_why_not(device, dtype, config)}
    kinds = (*PLAIN_KINDS, SLICES, *(kind for kind, why in why_not.items() if why is None))
    times = time_layouts(device, dtype, config.hidden_size, 2 * config.intermediate_size, ROWS, budget, kinds)
    return LayoutTimings(times, {kind: why for kind, why in why_not.items() if why}, budget)


def choose_layout(facts: ProfileFacts, timings: LayoutTimings, dtype: torch.dtype, config: ModelConfig,
                  free_bytes: int | None) -> tuple[WeightLayout, Choice]:
    """The kind for one-row steps and the kind for larger steps, from the timings (and bench's one-row ratio)."""
    name = str(dtype).removeprefix("torch.")
    k, n, times = config.hidden_size, 2 * config.intermediate_size, timings.times
    notes = [f"seconds per 1x{k}x{n} {name} product, weights cycled through {timings.stream_bytes / 2**20:.0f} "
             f"MiB (the model's linear weights, at most {STREAM_BYTES / 2**20:.0f} MiB), by rows: "
             + ", ".join(f"{m}:" + "/".join(f"{kind} {t * 1e6:.0f}us" for kind, t in row.items())
                         for m, row in times.items())]
    notes += [f"{kind} not tried: {why}" for kind, why in timings.skipped.items()]
    one = {kind: times[1][kind] for kind in PLAIN_KINDS}  # one row: x@W or F.linear (bench compares these two)
    bench = facts.linear_vs_matmul_speedup(name)
    if bench is not None:
        one[IN_OUT] = one[OUT_IN] * bench[0]  # bench's speed-up of F.linear over x@W is the same time ratio
        notes.append(f"1 row from bench: {bench[0]:.2f} (median of {bench[1]} decode GEMMs)")
    plain = _winner(one, OUT_IN)
    notes.append(f"plain winner at 1 row: {plain}")
    extras = [kind for kind in times[1] if kind not in PLAIN_KINDS]  # timed only here, so judged on these timings
    small = _winner({plain: times[1][plain], **{kind: times[1][kind] for kind in extras}}, plain)
    if small != plain:
        notes.append(f"{small} beats {plain} at 1 row ({times[1][small] * 1e6:.0f}us vs {times[1][plain] * 1e6:.0f}us)")
    switch, large = 1, small
    for m in list(times)[1:]:
        if _winner(times[m], small) != small:
            break
        switch = m
    above = [_winner(times[m], small) for m in times if m > switch]
    if above:
        large = max(set(above), key=above.count)
    if large != small:
        extra = linear_weight_bytes(config, dtype)
        if free_bytes is None or free_bytes < 4 * extra:
            notes.append(f"a second copy ({extra / 2**20:.0f} MiB) does not fit comfortably; one layout")
            large = small
        else:
            notes.append(f"both copies kept (+{extra / 2**20:.0f} MiB)")
    layout = WeightLayout(small, large, switch if large != small else 0)
    return layout, Choice(layout.describe(), "; ".join(notes))


def _panels_why_not(device: torch.device, dtype: torch.dtype, config: ModelConfig) -> str | None:
    c = config  # the head may have any width: it is padded with zero columns and the logits cut back
    outs = {(c.num_heads + 2 * c.num_kv_heads) * c.head_dim, c.hidden_size, 2 * c.intermediate_size}
    if c.moe is not None:
        outs.add(2 * c.moe.expert_intermediate_size)
    odd = sorted(o for o in outs if o % panel_kernel.PANEL)
    if odd:
        return f"layer output sizes {odd} are not multiples of {panel_kernel.PANEL}"
    return panel_kernel.check(device, dtype)


def _winner(seconds: dict[str, float], incumbent: str) -> str:
    """The fastest kind when it takes under MARGIN of the incumbent's time; otherwise the incumbent."""
    best = min(seconds, key=seconds.__getitem__)
    return best if seconds[best] < MARGIN * seconds[incumbent] else incumbent


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
