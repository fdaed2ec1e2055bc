"""FP8 storage for torch's `_scaled_mm` with per-row scales (the `fp8_scaled_mm_rowwise` kind): used where the
probe's `fp8_scaled_mm_rowwise` record verified that form on the device (scale_a [M, 1] and scale_b [1, N] float32,
a bfloat16 result: what CUDA's row-wise kernels take).

The weight: s_w[n] = max|W[n]| / 448 per output channel, codes = W / s_w rounded to e4m3 (ties to even), once at
load. The activations, at each call: s_x[m] = max|x[m]| / 448 per row (per token), codes likewise.

The bytes: int8_pack's layout (device_int8.py) holding e4m3 codes: [out + r, in] uint8, the first `out` rows the
codes (a contiguous view whose transpose is the column-major operand the kernel takes), then the `out` float32
scales.

The reference: x quantized per row as the kernel's caller does (the same float32 operations), times the dequantized
weight, in float64.
"""

from __future__ import annotations

import torch

from bringup.runner.weights.formats import device_int8
from bringup.runner.weights.formats.fp8 import FP8_DTYPE, FP8_MAX
from bringup.runner.weights.layouts import float64_linear

KERNEL = "_scaled_mm"
RESULT = torch.bfloat16


def _rows_quantized(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(t's e4m3 codes, its float32 scale per row [rows, 1]): a zero row keeps scale 1 and zero codes."""
    t = t.float()
    scale = t.abs().amax(dim=1, keepdim=True) / FP8_MAX
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    return (t / safe).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), safe


def quantize(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (on its device; in a multiple of 4) as fp8_scaled_mm_rowwise storage."""
    codes, scale = _rows_quantized(w.detach())
    return device_int8.pack(codes.view(torch.int8), scale.reshape(-1))


def unpack(stored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [out, in] float8_e4m3fn, scales [out] float32): views, no copies."""
    codes, scales = device_int8.unpack(stored)
    return codes.view(FP8_DTYPE), scales


def dequantize(stored: torch.Tensor) -> torch.Tensor:
    codes, scales = unpack(stored)
    return codes.float() * scales.unsqueeze(1)


def linear(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [T, in] @ W^T + b through `_scaled_mm` with per-row scales and a bfloat16 result, returned in x's dtype (a
    float64 x: the reference)."""
    if x.dtype == torch.float64:
        return reference(x, stored, bias).to(x.device)
    codes, w_scale = unpack(stored)
    x_codes, x_scale = _rows_quantized(x)
    y = torch._scaled_mm(x_codes, codes.t(), scale_a=x_scale, scale_b=w_scale.reshape(1, -1), out_dtype=RESULT)
    return (y if bias is None else y + bias.to(y.dtype)).to(x.dtype)


def reference(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    x_codes, x_scale = _rows_quantized(x.detach().cpu())
    return float64_linear(x_codes.double() * x_scale.double(), dequantize(stored.cpu()), bias)
