"""bringup's quantized linear kernels for host memory (kernels/quantized_linear.cpp and quantized_tile.h, built by
build.py): int8 and int4 weights in blocks of 32, stored as formats/integer.py lays them out.

torch's own CPU weight-only kernels (`_weight_int8pack_mm`, `_weight_int4pack_mm_for_cpu`) measured 2-10x slower
than float32 F.linear at one row on the machine this was written on, so the runner brings its own: the rows of x
quantized per block of 32, each block's product an integer dot product (VNNI where the CPU has it), scaled once,
every weight streamed once per step, output rows split across OpenMP threads; prefill too, where it was built with
SIMD (kernel_rows). Under torch.compile, and for long steps of a plain-C build, x is quantized the same way and
F.linear called on the dequantized weight, as the reference does.

Two kinds per scheme (weights/registry.py): "int8", "int4" (and "int4_g64", "int4_g128": groups of 64, 128) apply
the kernel (`kernel_linear`); "int8_dequant", "int4_dequant" (and theirs) apply the module-level reference
(`dequantized_linear`: x's blocks quantized, the weight dequantized, then F.linear in float32), the fallback where
the kernel cannot build or fails its check. x reaches the kernel as float32 (bfloat16 is widened).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import torch

from bringup.runner.weights.formats.integer import (
    GROUP,
    INT4_GROUPS,
    KERNEL_FORMATS,
    dequantize_int4,
    dequantize_int8,
    in_features,
    quantize_int4,
    quantize_int8,
    reference_linear,
)
from bringup.runner.weights.kernels.build import (
    LINEAR_ARGTYPES,
    HostKernelInputError,
    check_host_kernel,
    load,
    require_host_tensor,
)
from bringup.runner.weights.kinds import INT8

# Built in plain C (no AVX2), the kernel serves steps of up to this many rows; longer ones dequantize and call
# F.linear. With SIMD it serves every step: each run of tiles meets all of x's rows while in cache, and on the 2-core
# Xeon this was written on it beat dequantize + F.linear at every size tried (3072 x 576 int8, 512 rows: 4.7 ms vs
# 13.1 ms; float32 F.linear itself: 6.8 ms), the dequantize being most of the latter.
PLAIN_C_ROWS = 16
ENTRY_POINT = "bringup_quantized_linear"  # (format, then LINEAR_ARGTYPES); format: KERNEL_FORMATS[scheme]
DEQUANTIZE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    INT8: dequantize_int8, **{kind: functools.partial(dequantize_int4, group=g) for kind, g in INT4_GROUPS.items()}}
QUANTIZE: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    INT8: quantize_int8, **{kind: functools.partial(quantize_int4, group=g) for kind, g in INT4_GROUPS.items()}}
# how far the kernel's float32 result may be from the reference's, relative to the largest output: both sum the same
# float32 products, in a different order
TOLERANCE = 1e-4


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("quantized_linear.cpp")
    entry = getattr(lib, ENTRY_POINT)
    entry.argtypes, entry.restype = [ctypes.c_int64, *LINEAR_ARGTYPES], None
    return lib


@functools.lru_cache(maxsize=1)
def kernel_rows() -> int | None:
    """The most rows the kernel serves (None: any number), by the instructions it was built for."""
    return None if library().bringup_quantized_vector_bits() else PLAIN_C_ROWS


def run(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None, scheme: str) -> torch.Tensor:
    """x [m, k] (float32) @ W^T + bias with W stored for `scheme` ("int8" or "int4"), float32 [m, n]."""
    require_host_tensor("x", x, torch.float32, dims=2)
    require_host_tensor("weight", stored, torch.uint8, dims=2, contiguous=True)
    k, n = in_features(stored, scheme), stored.shape[0]
    if x.shape[1] != k:
        raise HostKernelInputError(f"x has {x.shape[1]} features per row but the quantized weight has k={k}")
    if bias is not None:
        require_host_tensor("bias", bias, torch.float32, dims=1, contiguous=True)
        if bias.numel() != n:
            raise HostKernelInputError(f"bias has {bias.numel()} values for {n} output features")
    if x.stride(-1) != 1:
        x = x.contiguous()
    y = torch.empty(x.shape[0], n, dtype=torch.float32)
    getattr(library(), ENTRY_POINT)(KERNEL_FORMATS[scheme], x.data_ptr(), x.shape[0], x.stride(0), stored.data_ptr(),
                                    k, n, None if bias is None else bias.data_ptr(), y.data_ptr(), n)
    return y


def kernel_linear(scheme: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]:
    def apply(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        most = kernel_rows()
        if (most is not None and x.shape[0] > most) or torch.compiler.is_compiling():
            return reference_linear(x, DEQUANTIZE[scheme](stored), bias)
        b = None if bias is None else bias.float()
        return run(x.float(), stored, b, scheme).to(x.dtype)

    return apply


def dequantized_linear(scheme: str) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]:
    def apply(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        return reference_linear(x, DEQUANTIZE[scheme](stored), bias)

    return apply


def check(device: torch.device, scheme: str) -> str | None:
    """None when the `scheme` kernel builds, runs here and matches the dequantize + F.linear reference (relative
    to the largest output, within TOLERANCE) on 1 to 11 rows; otherwise why not."""

    def worst_error() -> float:
        gen = torch.Generator().manual_seed(0)
        k = max(128, INT4_GROUPS.get(scheme, GROUP))  # whole groups of the scheme
        w, b = torch.randn(40, k, generator=gen), torch.randn(40, generator=gen)
        stored = QUANTIZE[scheme](w)
        worst = 0.0
        for rows in (1, 2, 3, 5, 11):
            x = torch.randn(rows, k, generator=gen)
            want = reference_linear(x, DEQUANTIZE[scheme](stored), b)
            worst = max(worst, (run(x, stored, b, scheme) - want).abs().max().item() / want.abs().max().item())
        return worst

    return check_host_kernel(device, torch.float32, worst_error, f"{scheme} kernel result differs from dequantize + "
                             "F.linear", {torch.float32: TOLERANCE})

