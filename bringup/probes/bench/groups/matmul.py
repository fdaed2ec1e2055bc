"""matmul: TFLOP/s per supported dtype over square sizes and a decoder layer's GEMM shapes, then the quantized
kernels at the decoder's shapes (quantized_matmul.py).

For M=1 (decode) it also measures F.linear on the [out, in] weight layout side by side with the
plain x @ W[in, out], since which one is faster is a property of the device (runner/plan/layout.py times both)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.probes.bench.accounting import matmul_work
from bringup.probes.bench.context import FLOAT_DTYPES, BenchContext
from bringup.probes.bench.groups.quantized_matmul import run_quantized
from bringup.probes.bench.records import measured, not_measured, set_speedup, short_error
from bringup.probes.bench.sizing import RateTracker, too_big_reason, too_slow_reason
from bringup.profiles.sections.bench import BenchGroup, BenchRecord


def dtypes_to_measure(ctx: BenchContext, notes: list[str]) -> tuple[list[str], list[BenchRecord]]:
    """Supported dtypes from the profile's capabilities; float32 alone (said so) without them."""
    supported = ctx.supported("dtypes")
    if supported is None:
        notes.append("no capabilities in the profile: measuring float32 only (run `bringup probe` first "
                     "to measure every supported dtype)")
        return ["float32"], []
    skipped = [
        not_measured(f"{name}", "matmul", "skipped", "no plain-matmul benchmark for this dtype "
                     "(float8/integer GEMMs need scaled or integer matmul entry points: see the quantized "
                     "kernels' records)", dtype=name)
        for name in supported if name not in FLOAT_DTYPES
    ]
    chosen = [name for name in FLOAT_DTYPES if name in supported]
    if not chosen:
        notes.append("the profile marks no floating dtype supported; nothing to measure")
    return chosen, skipped


def shapes(ctx: BenchContext) -> list[tuple[str, int, int, int, dict]]:
    """(key suffix, M, K, N, params) for every GEMM of the preset."""
    out = [(f"square {n}", n, n, n, {"kind": "square", "m": n, "k": n, "n": n})
           for n in ctx.preset.square_sizes]
    decoder = ctx.preset.decoder
    for gemm, (k, n) in decoder.gemms().items():
        for m in ctx.preset.llm_m:
            params = {"kind": "llm", "model": decoder.model, "gemm": gemm, "m": m, "k": k, "n": n}
            out.append((f"{gemm} {k}x{n} M={m}", m, k, n, params))
    return out


def measure_one(ctx: BenchContext, dtype: str, key: str, m: int, k: int, n: int, params: dict,
                rates: RateTracker) -> list[BenchRecord]:
    torch_dtype = getattr(torch, dtype)
    work = matmul_work(m, n, k, torch_dtype.itemsize)
    reason = too_big_reason(int(work.bytes), ctx.memory_budget_bytes()) or too_slow_reason(
        rates.estimate_s(dtype, work.flops), ctx.preset.max_call_s)
    if reason:
        return [not_measured(f"{dtype} {key}", "matmul", "skipped", reason, dtype=dtype, params=params)]
    ctx.on_step(f"matmul {dtype} {key}")
    try:
        a = torch.randn(m, k, device=ctx.device).to(torch_dtype)
        b = torch.randn(k, n, device=ctx.device).to(torch_dtype)
        timing = ctx.harness.measure(lambda: torch.matmul(a, b))
    except Exception as exc:  # an unsupported size/dtype on this device: record it, keep going
        return [not_measured(f"{dtype} {key}", "matmul", "error", short_error(exc), dtype=dtype, params=params)]
    rates.note(dtype, work.flops, timing.median_s)
    plain = measured(f"{dtype} {key}", "matmul", timing, work, dtype=dtype, params=params)
    records = [plain]
    if params.get("kind") == "llm" and m == 1:
        weight_out_in = b.t().contiguous()
        timing = ctx.harness.measure(lambda: F.linear(a, weight_out_in))
        alternative = measured(f"{dtype} {key} F.linear", "linear", timing, work, dtype=dtype,
                               params={**params, "layout": "weight [out, in] via F.linear"})
        set_speedup(alternative, plain)
        records.append(alternative)
    return records


def run(ctx: BenchContext) -> BenchGroup:
    notes: list[str] = []
    dtypes, records = dtypes_to_measure(ctx, notes)
    rates = RateTracker()
    for dtype in dtypes:
        for key, m, k, n, params in shapes(ctx):
            records.extend(measure_one(ctx, dtype, key, m, k, n, params, rates))
    records.extend(run_quantized(ctx, dtypes, records))
    status = "measured" if any(r.status == "ok" for r in records) else "skipped"
    return BenchGroup(status=status, reason=None if status == "measured" else "nothing measured",
                      notes=notes, records=records)
