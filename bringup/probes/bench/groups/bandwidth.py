"""memory bandwidth: BabelStream's copy, scale, add, triad and dot on arrays several times the LLC."""

from __future__ import annotations

from collections.abc import Callable

import torch

from bringup.probes.bench.accounting import STREAM_ARRAYS, stream_work
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, short_error
from bringup.profiles.sections.bench import BenchGroup, BenchRecord

SCALAR = 0.4  # BabelStream's start scalar
DTYPE = torch.float32
MIN_ELEMENTS = 1 << 20


def array_elements(ctx: BenchContext, notes: list[str]) -> int:
    """Elements per array: stream_llc_multiple x LLC, capped so three arrays fit the memory budget."""
    wanted = ctx.preset.stream_llc_multiple * ctx.llc.bytes // DTYPE.itemsize
    notes.append(f"arrays of {wanted * DTYPE.itemsize / 2**20:.0f} MiB = {ctx.preset.stream_llc_multiple} x "
                 f"last-level cache ({ctx.llc.bytes / 2**20:.0f} MiB, from {ctx.llc.source})")
    budget = ctx.memory_budget_bytes()
    if budget is not None and 3 * wanted * DTYPE.itemsize > budget:
        capped = max(MIN_ELEMENTS, budget // (3 * DTYPE.itemsize))
        notes.append(f"capped to {capped * DTYPE.itemsize / 2**20:.0f} MiB per array by free device memory")
        return capped
    return wanted


def kernels(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> dict[str, Callable[[], object]]:
    """BabelStream kernels as single torch ops that write into existing arrays (no allocation)."""
    return {
        "copy": lambda: c.copy_(a),
        "scale": lambda: torch.mul(c, SCALAR, out=b),
        "add": lambda: torch.add(a, b, out=c),
        "triad": lambda: torch.add(b, c, alpha=SCALAR, out=a),
        "dot": lambda: torch.dot(a, b),
    }


def run(ctx: BenchContext) -> BenchGroup:
    notes: list[str] = []
    n = array_elements(ctx, notes)
    records: list[BenchRecord] = []
    try:
        a = torch.full((n,), 0.1, dtype=DTYPE, device=ctx.device)
        b = torch.full((n,), 0.2, dtype=DTYPE, device=ctx.device)
        c = torch.zeros(n, dtype=DTYPE, device=ctx.device)
    except Exception as exc:  # out of memory or no float32 on the device
        return BenchGroup(status="skipped", reason=f"cannot allocate the arrays: {short_error(exc)}", notes=notes)
    params = {"elements": n, "array_bytes": n * DTYPE.itemsize}
    for name, fn in kernels(a, b, c).items():
        key = f"{name} float32"
        ctx.on_step(f"bandwidth {name}")
        try:
            timing = ctx.harness.measure(fn)
        except Exception as exc:
            records.append(not_measured(key, name, "error", short_error(exc), dtype="float32", params=params))
            continue
        work = stream_work(name, n, DTYPE.itemsize)
        records.append(measured(key, name, timing, work, dtype="float32",
                                params={**params, "arrays_touched": STREAM_ARRAYS[name]}))
    del a, b, c
    return BenchGroup(status="measured", notes=notes, records=records)
