"""FP8 storage for torch's `_scaled_mm` (the `fp8_scaled_mm` kind): the kernel the probe's `fp8_scaled_mm` record
verified on an accelerator, with the scales that record's cases use: one float32 scale per tensor, a float32 result.

`_scaled_mm` multiplies float8 by float8, so this is not the weight-only `fp8` kind: the activations are quantized
too, at each call, per tensor (s_x = max|x| / 448, x's codes = x / s_x rounded to e4m3, ties to even). The weight:
s_w = max|W| / 448, codes = W / s_w rounded to e4m3, both computed once at load.

The bytes, one uint8 tensor: [out + 1, in], the first `out` rows the e4m3 codes (a contiguous [out, in] view, whose
transpose is the column-major operand the kernel takes), the last row's first 4 bytes s_w (float32), then zeros.

The reference: x quantized as the kernel's caller does (the same float32 operations), times the dequantized weight,
in float64.
"""

from __future__ import annotations

import torch

from bringup.runner.weights.formats.fp8 import FP8_DTYPE, FP8_MAX
from bringup.runner.weights.layouts import float64_linear

SCALE_BYTES = 4
KERNEL = "_scaled_mm"


def quantize(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (on its device; in at least 4) as fp8_scaled_mm storage."""
    w = w.detach().float()
    k = w.shape[1]
    if k < SCALE_BYTES:
        raise ValueError(f"fp8_scaled_mm needs at least {SCALE_BYTES} input features, not {k}")
    scale = (w.abs().amax() / FP8_MAX).reshape(1)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = (w / safe).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE).view(torch.uint8)
    tail = torch.zeros(1, k, dtype=torch.uint8, device=w.device)
    tail[0, :SCALE_BYTES] = scale.contiguous().view(torch.uint8)
    return torch.cat([codes, tail]).contiguous()


def unpack(stored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [out, in] float8_e4m3fn, the weight's scale as a one-element float32 tensor): views, no copies."""
    return stored[:-1].view(FP8_DTYPE), stored[-1, :SCALE_BYTES].view(torch.float32)


def dequantize(stored: torch.Tensor) -> torch.Tensor:
    codes, scale = unpack(stored)
    return codes.float() * scale


def quantize_activations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x's e4m3 codes, its float32 scale [1]) as the kernel is fed: per tensor, in float32."""
    x = x.float()
    scale = (x.abs().amax() / FP8_MAX).reshape(1)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    return (x / safe).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE), safe


def linear(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [T, in] @ W^T + b through `_scaled_mm` (per-tensor scales, float32 result), returned in x's dtype (a
    float64 x: the reference, for selftest's float64 model)."""
    if x.dtype == torch.float64:
        return reference(x, stored, bias).to(x.device)
    codes, w_scale = unpack(stored)
    x_codes, x_scale = quantize_activations(x)
    y = torch._scaled_mm(x_codes, codes.t(), scale_a=x_scale.reshape(()), scale_b=w_scale.reshape(()),
                         out_dtype=torch.float32)
    if bias is not None:
        y = y + bias.float()
    return y.to(x.dtype)


def reference(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    x_codes, x_scale = quantize_activations(x.detach().cpu().float())
    return float64_linear(x_codes.double() * x_scale.double(), dequantize(stored.cpu()), bias)
