"""Catalog: the quantized matmul kernels, each judged against a float64 reference of the dequantized math.

The conventions checked (torch 2.x: the quantizers in torch/testing/_internal/common_quantization.py that torch's
own tests feed these kernels, and the kernels' argument checks in torch/_meta_registrations.py):

- `_weight_int8pack_mm(x[M,K], w[N,K] int8, scales[N])` = x @ (w * scales[:, None]).T, scales in x's dtype.
  Weights are quantized per output channel, symmetric: scale = max|w| / 127.5, q = clamp(round(w / scale),
  -128, 127) (`_dynamically_quantize_per_channel`).
- int4, per group of G consecutive K (G = 32, 64 or 128): q[N,K] in 0..15 (unsigned nibbles),
  qScaleAndZeros[K/G, N, 2] = (scale, zero) in x's dtype, and the dequantized weight is
  w = (q - 8) * scale + zero. torch's quantizer (`_group_quantize_tensor`) picks scale = (max - min) / 15
  (at least 1e-6 / 15), zero = min + 8 * scale, q = clamp(round((w - min) / scale), 0, 15), round half to even.
  `_convert_weight_to_int4pack_for_cpu(q int32 [N,K], inner_k_tiles)` packs for `_weight_int4pack_mm_for_cpu`
  (N a multiple of 16); `_convert_weight_to_int4pack(u8 [N,K/2], inner_k_tiles)` takes the nibbles packed
  two per byte, even k in the high nibble, and packs for `_weight_int4pack_mm` (CUDA, ROCm, MPS, XPU).
- `_int_mm(a int8 [M,K], b int8 [K,N])` = a @ b in int32, exact.
- `_scaled_mm(a fp8 [M,K], b fp8 [K,N] column-major, scale_a, scale_b)` = (a * scale_a) @ (b * scale_b), per
  tensor (scalar scales) or per row of a and column of b ([M,1] and [1,N] float32 scales).

A kernel this torch lacks is looked up by name when the case runs and reported `unsupported` with that reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, Param, op

INT4_GROUPS = (32, 64, 128)


@dataclass(frozen=True)
class Int4Kernels:
    """An int4 weight-only matmul and the kernel that packs its weights."""

    pack: str
    matmul: str
    packs_bytes: bool  # the packing kernel takes uint8 [N,K/2] (two codes a byte), not int32 codes [N,K]


INT4_OPS = {  # op name in the catalog -> its kernels
    "_weight_int4pack_mm_for_cpu": Int4Kernels("_convert_weight_to_int4pack_for_cpu", "_weight_int4pack_mm_for_cpu",
                                               packs_bytes=False),
    "_weight_int4pack_mm": Int4Kernels("_convert_weight_to_int4pack", "_weight_int4pack_mm", packs_bytes=True),
}


def aten_kernel(name: str) -> Callable:
    """torch.ops.aten.<name>, or NotImplementedError (an `unsupported` case) when this torch has no such op."""
    try:
        return getattr(torch.ops.aten, name)
    except (AttributeError, RuntimeError):
        raise NotImplementedError(f"this torch ({torch.__version__}) has no aten.{name}; a newer torch or "
                                  "another build may have it") from None


def quantize_int8_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q int8 [N,K], scales [N]) by torch's symmetric per-channel rule (see the module docstring)."""
    scales = (w.abs().amax(dim=1) / 127.5).clamp(min=torch.finfo(torch.float32).eps)
    q = torch.clamp(torch.round(w / scales[:, None]), -128, 127).to(torch.int8)
    return q, scales


def dequantize_int8(q: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return q.to(torch.float64) * scales.to(torch.float64)[:, None]


def quantize_int4_groups(w: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(q int32 [N,K] in 0..15, scales_and_zeros [K/G, N, 2]) by torch's asymmetric per-group rule."""
    n, k = w.shape
    groups = w.reshape(n, k // group, group)
    low, high = groups.amin(dim=-1, keepdim=True), groups.amax(dim=-1, keepdim=True)
    scales = (high - low).clamp(min=1e-6) / 15
    zeros = low + 8 * scales
    q = torch.clamp(torch.round((groups - low) / scales), 0, 15).to(torch.int32).reshape(n, k)
    return q, torch.cat([scales, zeros], dim=-1).transpose(0, 1).contiguous()


def dequantize_int4(q: torch.Tensor, scales_and_zeros: torch.Tensor, group: int) -> torch.Tensor:
    """w[n,k] = (q[n,k] - 8) * scale[k // G, n] + zero[k // G, n], in float64."""
    per_k = scales_and_zeros.to(torch.float64).transpose(0, 1).repeat_interleave(group, dim=1)  # [N, K, 2]
    return (q.to(torch.float64) - 8) * per_k[..., 0] + per_k[..., 1]


def nibbles_in_bytes(q: torch.Tensor) -> torch.Tensor:
    """[N,K] values 0..15 -> uint8 [N,K/2], even k in the high nibble (the input `_convert_weight_to_int4pack`
    takes)."""
    return (q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8)


def inner_k_tiles(k: int) -> int:
    """The largest of 8/4/2 whose tile (16 * tiles) divides K (the packing kernels need K % (16 * tiles) == 0)."""
    return next((tiles for tiles in (8, 4, 2) if k % (16 * tiles) == 0), 2)


def largest_group(k: int) -> int | None:
    return next((g for g in sorted(INT4_GROUPS, reverse=True) if k % g == 0), None)


def pack_int4(op_name: str, q: torch.Tensor) -> torch.Tensor:
    """int32 codes [N,K] in 0..15 packed by the op's own packing kernel (on q's device)."""
    kernels = INT4_OPS[op_name]
    return aten_kernel(kernels.pack)(nibbles_in_bytes(q) if kernels.packs_bytes else q, inner_k_tiles(q.shape[1]))


def int4_matmul(op_name: str, x: torch.Tensor, packed: torch.Tensor, group: int,
                scales_and_zeros: torch.Tensor) -> torch.Tensor:
    return aten_kernel(INT4_OPS[op_name].matmul)(x, packed, group, scales_and_zeros)


def _weights(g: torch.Generator, n: int, k: int) -> torch.Tensor:
    return randn(g, n, k, scale=1.0 / math.sqrt(k))


def int8pack_case(role: str, m: int, k: int, n: int, params: tuple[Param, ...] = (),
                  kernel: str = "_weight_int8pack_mm") -> CaseSpec:
    def make(g: torch.Generator) -> list:
        x = randn(g, m, k)
        q, scales = quantize_int8_per_channel(_weights(g, n, k))
        return [x, q, scales]

    def fn(x, q, scales):
        return aten_kernel(kernel)(x, q, scales)

    def ref(x, q, scales):
        return x @ dequantize_int8(q, scales).T
    return CaseSpec(make, fn, shapes=((m, k), (n, k)), role=role, params=(*params, ("weights", "int8 per channel")),
                    ref=ref, accum=k)


def int4pack_case(op_name: str, role: str, m: int, k: int, n: int, group: int,
                  params: tuple[Param, ...] = ()) -> CaseSpec:
    def make(g: torch.Generator) -> list:
        x = randn(g, m, k)
        q, scales_and_zeros = quantize_int4_groups(_weights(g, n, k), group)
        return [x, q, scales_and_zeros]

    def fn(x, q, scales_and_zeros):
        return int4_matmul(op_name, x, pack_int4(op_name, q), group, scales_and_zeros)

    def ref(x, q, scales_and_zeros):
        return x @ dequantize_int4(q, scales_and_zeros, group).T
    return CaseSpec(make, fn, shapes=((m, k), (n, k)), role=role, params=(*params, ("group", group)), ref=ref,
                    accum=k)


def int_mm_case(m: int, k: int, n: int, b_transposed: bool = False, role: str = "",
                params: tuple[Param, ...] = ()) -> CaseSpec:
    b_shape = (n, k) if b_transposed else (k, n)

    def make(g: torch.Generator) -> list:
        a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int64).to(torch.int8)
        b = torch.randint(-128, 128, b_shape, generator=g, dtype=torch.int64).to(torch.int8)
        return [a, b]

    def fn(a, b):
        return aten_kernel("_int_mm")(a, b)

    def ref(a, b):
        return a.to(torch.int64) @ b.to(torch.int64)
    return CaseSpec(make, fn, shapes=((m, k), b_shape), role=role, view="b transposed" if b_transposed else "",
                    params=params, ref=ref, judge="exact", accum=k, layout=_transposed(1) if b_transposed else None)


# Measured on an H200 (torch 2.11, cuBLAS): float32 results of float8 products off the float64 sum by an NMSE of
# 1.5e-8 and up to 1e-3 of the outputs' rms, about what float16 accumulation gives, not float32's 1e-7
FP8_ACCUMULATOR_REASON = (
    "judged at float16's row, not the float32 result's: float8 tensor-core products may accumulate in fewer "
    "bits than float32 (Hopper's keep about 14, as DeepSeek-V3's report measured), and _scaled_mm promises no more"
)


ROWWISE = "per row/column"  # the rowwise cases' scales parameter (capabilities/quantized.py picks them by it)


def scaled_mm_case(m: int, k: int, n: int, role: str = "", rowwise: bool = False,
                   params: tuple[Param, ...] = ()) -> CaseSpec:
    """Per-tensor scales with a float32 result, or per-row/column scales with a bfloat16 result (the form the
    row-wise kernels of CUDA/ROCm take)."""
    out_dtype = torch.bfloat16 if rowwise else torch.float32

    def make(g: torch.Generator) -> list:
        if rowwise:
            scale_a = (torch.rand(m, 1, generator=g) + 0.25).to(torch.float32)
            scale_b = (torch.rand(1, n, generator=g) + 0.25).to(torch.float32)
        else:
            scale_a, scale_b = torch.tensor(0.5, dtype=torch.float32), torch.tensor(0.25, dtype=torch.float32)
        return [randn(g, m, k), randn(g, n, k), scale_a, scale_b]

    def fn(a, b, sa, sb):
        return aten_kernel("_scaled_mm")(a, b, scale_a=sa, scale_b=sb, out_dtype=out_dtype)

    def ref(a, b, sa, sb):
        return (a * sa) @ (b * sb)
    if rowwise:
        params = (*params, ("scales", ROWWISE), ("out", "bfloat16"))
    return CaseSpec(make, fn, shapes=((m, k), (n, k)), role=role, view="b transposed", params=params, ref=ref,
                    layout=_transposed(1), accum=k, keep_dtype=(2, 3),
                    accumulator=None if rowwise else "float16", accumulator_reason=FP8_ACCUMULATOR_REASON)


def _transposed(i: int):
    """Layout: argument i is generated as [n, k] and seen as its transpose [k, n]."""
    def layout(args: list) -> list:
        args = list(args)
        args[i] = args[i].transpose(-1, -2)
        return args
    return layout


# (role, M, K, N): decode (M = 1..4) and prefill (M = 64..256) shapes, and one odd size
SHAPES = [("decode", 1, 1024, 512), ("decode", 4, 1024, 512), ("prefill", 64, 1024, 512),
          ("prefill", 256, 512, 256), ("odd", 3, 384, 80)]
INT4_GROUP_BY_SHAPE = (32, 64, 128, 32, 64)  # every group size at decode and at prefill


def int4_cases(op_name: str) -> list[CaseSpec]:
    cases = [int4pack_case(op_name, role, m, k, n, group)
             for (role, m, k, n), group in zip(SHAPES, INT4_GROUP_BY_SHAPE)]
    cases.append(int4pack_case(op_name, "decode", 1, 1024, 512, 128))
    return cases


INT4_NOTE = ("weight-only int4, w = (q - 8) * scale + zero per group of K; {packing} packs q first; "
             "activations and scales in the dtype")


def quantized_ops() -> list[OpSpec]:
    int8pack = op("_weight_int8pack_mm", "quantized", [int8pack_case(*shape) for shape in SHAPES],
                  note="weight-only int8, x @ (w * scales[:, None]).T per output channel; activations and "
                       "scales in the dtype")
    int4_cpu = op("_weight_int4pack_mm_for_cpu", "quantized", int4_cases("_weight_int4pack_mm_for_cpu"),
                  note=INT4_NOTE.format(packing="_convert_weight_to_int4pack_for_cpu (int32 [N,K])"))
    int4 = op("_weight_int4pack_mm", "quantized", int4_cases("_weight_int4pack_mm"),
              note=INT4_NOTE.format(packing="_convert_weight_to_int4pack (uint8 [N,K/2])") + "; CUDA/ROCm "
                   "take bfloat16 activations")
    int_mm = op("_int_mm", "matmul", [
        int_mm_case(32, 64, 32),
        int_mm_case(48, 1024, 40),
        int_mm_case(32, 128, 64, b_transposed=True),
        *(int_mm_case(m, k, n, role=role) for role, m, k, n in SHAPES[:3]),
    ], dtypes=("int8",), note="where the device offers it; int32 results are exact")
    scaled_mm = op("_scaled_mm", "matmul", [
        scaled_mm_case(32, 64, 32),
        scaled_mm_case(16, 256, 48),
        *(scaled_mm_case(m, k, n, role=role) for role, m, k, n in SHAPES[:3]),
        scaled_mm_case(64, 1024, 512, role="prefill", rowwise=True),
        scaled_mm_case(1, 1024, 512, role="decode", rowwise=True),
    ], dtypes=("float8_e4m3fn",), note="float8 inputs, float32 output; where the device offers it")
    return [int_mm, scaled_mm, int8pack, int4_cpu, int4]
