"""matmul, quantized kernels: each as GEMV (M=1) and GEMM (the preset's tokens closest to 128 from below) at the
preset decoder's shapes, with the bytes it must move — quantized weights plus their scales and zeros — so the
roofline shows int8/int4 decode against the memory ceiling. Each record is set beside the float matmul of the same
shape and activation dtype (M=1: F.linear on the [out, in] weight) that the matmul group measured in this run.

Weights are random codes, not quantized floats: a kernel's time does not depend on the values. The kernels and
their layouts are those verify-ops checks (bringup/probes/ops/catalog/quantized.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from bringup.probes.bench.accounting import Work, scaled_matmul_work, weight_only_work
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, set_speedup, short_error
from bringup.probes.bench.sizing import RateTracker, too_big_reason, too_slow_reason
from bringup.probes.capabilities.quantized import capability_of
from bringup.probes.ops.catalog.quantized import INT4_OPS, aten_kernel, int4_matmul, largest_group, pack_int4
from bringup.probes.ops.judge.error_kinds import is_unsupported_error
from bringup.profiles.sections.bench import BenchRecord

GEMM_TOKENS = 128  # "GEMM": the preset's largest M up to this
Call = Callable[[], torch.Tensor]


@dataclass(frozen=True)
class Shape:
    m: int
    k: int
    n: int


@dataclass(frozen=True)
class QuantKernel:
    """A quantized matmul kernel: the weight format it reads, its work, and how to set up one call."""

    name: str
    weights: str  # the record's dtype: int8, int4, float8_e4m3fn
    weight_only: bool  # float activations (compute in their dtype) vs quantized activations too
    work: Callable[[Shape, torch.dtype], Work]
    setup: Callable[[Shape, torch.dtype, torch.device], Call]
    setup_bytes: Callable[[Shape], int]  # device memory set-up takes beyond the work's bytes


def _int8_weight_only(s: Shape, act: torch.dtype, device: torch.device) -> Call:
    x = torch.randn(s.m, s.k, device=device).to(act)
    q = torch.randint(-128, 128, (s.n, s.k), dtype=torch.int8, device=device)
    scales = torch.rand(s.n, device=device).to(act)
    kernel = aten_kernel("_weight_int8pack_mm")
    return lambda: kernel(x, q, scales)


def int4_group(k: int) -> int:
    """The group size timed: the largest of 128/64/32 dividing K (K itself when none does)."""
    return largest_group(k) or k


def _int4_setup(op_name: str):
    def setup(s: Shape, act: torch.dtype, device: torch.device) -> Call:
        group = int4_group(s.k)
        x = torch.randn(s.m, s.k, device=device).to(act)
        packed = pack_int4(op_name, torch.randint(0, 16, (s.n, s.k), dtype=torch.int32, device=device))
        scales_and_zeros = torch.rand(s.k // group, s.n, 2, device=device).to(act)
        return lambda: int4_matmul(op_name, x, packed, group, scales_and_zeros)
    return setup


def _int4_scratch(s: Shape) -> int:
    """The int32 codes set-up makes before packing (freed after)."""
    return 4 * s.n * s.k


def _no_scratch(s: Shape) -> int:
    return 0


def _int_mm(s: Shape, act: torch.dtype, device: torch.device) -> Call:
    a = torch.randint(-128, 128, (s.m, s.k), dtype=torch.int8, device=device)
    b = torch.randint(-128, 128, (s.n, s.k), dtype=torch.int8, device=device).t()  # weights as stored: [out, in]
    kernel = aten_kernel("_int_mm")
    return lambda: kernel(a, b)


def _scaled_mm(s: Shape, act: torch.dtype, device: torch.device) -> Call:
    fp8 = torch.float8_e4m3fn
    a = torch.randn(s.m, s.k, device=device).to(fp8)
    b = torch.randn(s.n, s.k, device=device).to(fp8).t()
    one = torch.tensor(1.0, device=device)
    kernel = aten_kernel("_scaled_mm")
    return lambda: kernel(a, b, scale_a=one, scale_b=one, out_dtype=torch.float32)


def _int4_work(s: Shape, act: torch.dtype) -> Work:
    group = int4_group(s.k)
    return weight_only_work(s.m, s.n, s.k, act.itemsize, 4, 2 * (s.k // group) * s.n * act.itemsize)


def kernels() -> list[QuantKernel]:
    return [
        QuantKernel("_weight_int8pack_mm", "int8", True,
                    lambda s, act: weight_only_work(s.m, s.n, s.k, act.itemsize, 8, s.n * act.itemsize),
                    _int8_weight_only, _no_scratch),
        *(QuantKernel(name, "int4", True, _int4_work, _int4_setup(name), _int4_scratch) for name in INT4_OPS),
        QuantKernel("_int_mm", "int8", False, lambda s, act: scaled_matmul_work(s.m, s.n, s.k, 1, 4, 0),
                    _int_mm, _no_scratch),
        QuantKernel("_scaled_mm", "float8_e4m3fn", False, lambda s, act: scaled_matmul_work(s.m, s.n, s.k, 1, 4, 8),
                    _scaled_mm, _no_scratch),
    ]


def token_counts(ctx: BenchContext) -> tuple[int, int]:
    """(GEMV, GEMM) M: 1 and the preset's largest llm M up to GEMM_TOKENS (so the matmul group has the baseline)."""
    return 1, max((m for m in ctx.preset.llm_m if m <= GEMM_TOKENS), default=1)


def baseline_key(act: str, gemm: str, s: Shape) -> str:
    """The matmul group's float record for the same shape: F.linear on [out, in] at M=1, else the plain matmul."""
    key = f"{act} {gemm} {s.k}x{s.n} M={s.m}"
    return f"{key} F.linear" if s.m == 1 else key


def unproven_reason(ctx: BenchContext, kernel: QuantKernel) -> str | None:
    """Why a kernel is not timed: the profile's capabilities do not mark it supported (None: time it; without
    capabilities every kernel is tried and a missing one recorded)."""
    group, name = ("dtypes", "int8") if kernel.name == "_int_mm" else ("features", capability_of(kernel.name))
    statuses = ctx.capability_names(group)
    if statuses is None or statuses.get(name or "") == "supported":
        return None
    return (f"capabilities.{group}.{name} is {statuses.get(name or '', 'not probed')} in the profile: only "
            "kernels the probe proved are timed (`bringup probe --only features` proves them)")


def measure_kernel(ctx: BenchContext, kernel: QuantKernel, act: str, gemm: str, s: Shape, rates: RateTracker,
                   baselines: dict[str, BenchRecord]) -> BenchRecord:
    act_dtype = getattr(torch, act)
    work = kernel.work(s, act_dtype)
    key = f"{kernel.name} {act if kernel.weight_only else kernel.weights} {gemm} {s.k}x{s.n} M={s.m}"
    params = {"kind": "quantized", "kernel": kernel.name, "model": ctx.preset.decoder.model, "gemm": gemm,
              "m": s.m, "k": s.k, "n": s.n, "activations": act if kernel.weight_only else kernel.weights,
              "compute_dtype": act if kernel.weight_only else kernel.weights}
    if kernel.weights == "int4":
        params["group"] = int4_group(s.k)
    reason = unproven_reason(ctx, kernel) or too_big_reason(
        int(work.bytes) + kernel.setup_bytes(s), ctx.memory_budget_bytes()) or too_slow_reason(
        rates.estimate_s(kernel.name, work.flops), ctx.preset.max_call_s)
    if reason:
        return not_measured(key, kernel.name, "skipped", reason, dtype=kernel.weights, params=params)
    ctx.on_step(f"matmul {key}")
    try:
        call = kernel.setup(s, act_dtype, ctx.device)
        timing = ctx.harness.measure(call)
    except Exception as exc:  # a kernel this torch or device lacks, or a shape it refuses: recorded, not fatal
        status = "not_applicable" if is_unsupported_error(exc) else "error"
        return not_measured(key, kernel.name, status, short_error(exc), dtype=kernel.weights, params=params)
    rates.note(kernel.name, work.flops, timing.median_s)
    record = measured(key, kernel.name, timing, work, dtype=kernel.weights, params=params)
    baseline = baselines.get(baseline_key(act, gemm, s)) if kernel.weight_only else None
    if baseline is not None and baseline.status == "ok":
        set_speedup(record, baseline)
    return record


def run_quantized(ctx: BenchContext, float_dtypes: list[str], measured_so_far: list[BenchRecord]
                  ) -> list[BenchRecord]:
    """Every quantized kernel at GEMV and GEMM per decoder GEMM, weight-only ones per activation dtype of the
    preset that the matmul group measured."""
    baselines = {r.key: r for r in measured_so_far}
    activations = [a for a in ctx.preset.quant_activations if a in float_dtypes] or ["float32"]
    rates = RateTracker()
    records: list[BenchRecord] = []
    for kernel in kernels():
        for act in activations if kernel.weight_only else activations[:1]:
            for gemm, (k, n) in ctx.preset.decoder.gemms().items():
                for m in token_counts(ctx):
                    records.append(measure_kernel(ctx, kernel, act, gemm, Shape(m, k, n), rates, baselines))
    return records
