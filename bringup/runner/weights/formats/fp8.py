"""FP8 storage for linear layers (`--quantization fp8`, and compressed-tensors FP8 checkpoints): weight-only, the
activations stay in the plan dtype.

A stored weight is one uint8 tensor per layer: per output channel, its `in` float8_e4m3fn codes followed by one
float32 scale (4 bytes): w = scale * q, scale = max|w over the row| / 448 (e4m3's largest finite value),
q = w / scale rounded to the nearest e4m3 value (ties to even, torch's cast), clamped to +-448. A checkpoint's
per-tensor scale is the same scale repeated on every row.

The module-level reference, and the path the runner applies: dequantize to float32, then F.linear in float32,
the result returned in x's dtype. torch's `_scaled_mm` is not that product: it takes float8 activations too
(`scaled_mm_why_not` measures how far it lands from the weight-only reference on the device).

A layer a checkpoint left unquantized (its `ignore` list, or a head tied to the embedding) is kept under the same
kind as its plain [out, in] weight in the plan dtype, told apart by its dtype: a model has one weight kind per
step, and such a layer is then applied as stored, never quantized by bringup.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.errors import exception_line

FP8_DTYPE = torch.float8_e4m3fn
FP8_MAX = 448.0  # the largest finite float8_e4m3fn value
SCALE_BYTES = 4  # one float32 scale per output channel, after the row's codes
# relative to the largest output: a kernel that computes the weight-only product differs only in summation order
KERNEL_TOLERANCE = 1e-4


def is_quantized(stored: torch.Tensor) -> bool:
    """True for an FP8 row pack; False for a weight kept plain (see the module's docstring)."""
    return stored.dtype == torch.uint8


def pack_fp8(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Codes [out, in] (float8_e4m3fn) and a float32 scale per row [out] as stored rows [out, in + 4] (uint8)."""
    scale_bytes = scale.to(torch.float32).reshape(-1, 1).contiguous().view(torch.uint8)
    return torch.cat([codes.contiguous().view(torch.uint8), scale_bytes], dim=1).contiguous()


def codes_of(w: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """W [out, in] divided by its row scales [out], rounded to e4m3 (a zero scale gives zero codes)."""
    safe = torch.where(scale > 0, scale, torch.ones_like(scale)).unsqueeze(1)
    return (w.float() / safe).clamp(-FP8_MAX, FP8_MAX).to(FP8_DTYPE)


def quantize_fp8(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] as FP8 rows with a float32 scale each: [out, in + 4] uint8."""
    w = w.detach().float()
    scale = w.abs().amax(dim=1) / FP8_MAX
    return pack_fp8(codes_of(w, scale), scale)


def fp8_in_features(stored: torch.Tensor) -> int:
    return stored.shape[1] - SCALE_BYTES


def dequantize_fp8(stored: torch.Tensor) -> torch.Tensor:
    """The weight [out, in] as float32 (a plain weight is returned as it is stored)."""
    if not is_quantized(stored):
        return stored
    k = fp8_in_features(stored)
    codes = stored[:, :k].contiguous().view(FP8_DTYPE).float()
    scale = stored[:, k:].contiguous().view(torch.float32)
    return codes * scale


def fp8_linear(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ W^T + b: dequantize, then F.linear in float32 (float64 for a float64 x: selftest's reference), returned
    in x's dtype (a plain weight: F.linear as is, in x's dtype)."""
    if not is_quantized(stored):
        return F.linear(x, stored.to(x.dtype), None if bias is None else bias.to(x.dtype))
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    y = F.linear(x.to(dtype), dequantize_fp8(stored).to(dtype), None if bias is None else bias.to(dtype))
    return y.to(x.dtype)


def fp8_why_not(device: torch.device) -> str | None:
    """None when `device` stores float8_e4m3fn and casts to and from it exactly (checked by executing the casts
    on values e4m3 holds, including its extremes); otherwise why not."""
    values = [0.0, 1.0, -448.0, 448.0, 0.015625, -3.5, 2.0 ** -9]
    try:
        exact = torch.tensor(values, dtype=torch.float32, device=device)
        back = exact.to(FP8_DTYPE).view(torch.uint8).view(FP8_DTYPE).float().cpu()
    except Exception as exc:  # no float8 in this build, or not on this device
        return f"{device} has no float8_e4m3fn storage or casts ({exception_line(exc, 120)})"
    if not torch.equal(back, torch.tensor(values)):
        return f"{device}'s float8_e4m3fn casts change values e4m3 holds exactly ({values} -> {back.tolist()})"
    return None


def scaled_mm_why_not(device: torch.device) -> str:
    """Why torch's `_scaled_mm` is not the FP8 kernel for weight-only FP8 here: it fails, or it computes a product
    other than dequantize + F.linear (it takes float8 activations). Measured on a small check."""
    gen = torch.Generator().manual_seed(0)
    w, x = torch.randn(48, 64, generator=gen), torch.randn(4, 64, generator=gen)
    stored = quantize_fp8(w)
    want = fp8_linear(x, stored, None)
    k = fp8_in_features(stored)
    try:
        codes = stored[:, :k].contiguous().view(FP8_DTYPE).to(device)
        scale = stored[:, k:].contiguous().view(torch.float32).reshape(1, -1).to(device)
        x_scale = x.abs().amax(dim=1, keepdim=True) / FP8_MAX  # a scale per row, as a weight's per channel
        x_codes = (x / x_scale).to(FP8_DTYPE).to(device)
        got = torch._scaled_mm(x_codes, codes.t(), scale_a=x_scale.to(device), scale_b=scale,
                               out_dtype=torch.float32).cpu()
    except Exception as exc:
        return f"torch's _scaled_mm does not run here ({exception_line(exc, 120)})"
    error = ((got - want).abs().max() / want.abs().max()).item()
    if error > KERNEL_TOLERANCE:
        return (f"torch's _scaled_mm takes float8 activations, so it is not the weight-only product: "
                f"{error:.2g} from dequantize + F.linear (relative to the largest output) on a check here")
    return "torch's _scaled_mm matched on a check here, but it quantizes the activations, which fp8 does not"
