"""int8 weight-only storage for torch's device kernel `_weight_int8pack_mm` (the `int8_pack` kind): the kernel the
probe's `int8_weight_only_matmul` record verified on an accelerator.

The values: one float32 scale per output channel, symmetric: s = max|w over the row| / 127, q = round(w / s)
clamped to [-127, 127] (ties to even, computed as w * (1 / s) in float32, as the host's int8 is). The kernel takes
one scale per row, so GGUF's Q8_0 (a scale per block of 32) cannot go in as it is: its blocks are dequantized and
quantized again per row, once at load (the plan's row says so).

The bytes, one uint8 tensor per weight so that it is a buffer like any other kind's: [out + r, in], the first `out`
rows the int8 codes as they are (a contiguous [out, in] int8 view, what the kernel reads), the last r = ceil(4 * out
/ in) rows the `out` float32 scales (then zero padding). The scales are cast to the activations' dtype at each call:
the kernel wants them in x's dtype.

The product: x @ (q * s)^T in x's dtype (the kernel's own arithmetic); the reference: the same product in float64
from the stored codes and scales.
"""

from __future__ import annotations

import torch

from bringup.runner.weights.layouts import float64_linear

CODE_MAX = 127
SCALE_BYTES = 4  # float32
KERNEL = "_weight_int8pack_mm"


def scale_rows(out: int, in_features: int) -> int:
    return -(-out * SCALE_BYTES // in_features)


def out_features(stored: torch.Tensor) -> int:
    """The output channels of a stored weight: scale_rows undone (out + scale_rows(out) rows grow with out)."""
    rows, k = stored.shape
    out = rows * k // (k + SCALE_BYTES)
    while out + scale_rows(out, k) < rows:
        out += 1
    while out > 0 and out + scale_rows(out, k) > rows:
        out -= 1
    return out


def pack(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Codes [out, in] (int8) and float32 scales [out] as the stored [out + r, in] uint8."""
    out, k = codes.shape
    if k % SCALE_BYTES:
        raise ValueError(f"int8_pack needs input features in multiples of {SCALE_BYTES}, not {k}")
    scale_bytes = scale.to(torch.float32).contiguous().view(torch.uint8)
    tail = torch.zeros(scale_rows(out, k) * k, dtype=torch.uint8, device=codes.device)
    tail[: scale_bytes.numel()] = scale_bytes
    return torch.cat([codes.contiguous().view(torch.uint8), tail.reshape(-1, k)]).contiguous()


def unpack(stored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes [out, in] int8, scales [out] float32): views of the stored tensor, no copies."""
    out = out_features(stored)
    codes = stored[:out].view(torch.int8)
    scales = stored[out:].reshape(-1)[: out * SCALE_BYTES].view(torch.float32)
    return codes, scales


def quantize(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (on its device) as int8_pack storage."""
    w = w.detach().float()
    scale = w.abs().amax(dim=1) / CODE_MAX
    inverse = torch.where(scale > 0, 1 / scale, torch.zeros_like(scale))
    codes = torch.round(w * inverse.unsqueeze(1)).clamp(-CODE_MAX, CODE_MAX).to(torch.int8)
    return pack(codes, scale)


def dequantize(stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] the stored codes and scales give."""
    codes, scales = unpack(stored)
    return codes.float() * scales.unsqueeze(1)


def linear(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [T, in] @ W^T + b through `_weight_int8pack_mm`, in x's dtype (a float64 x: the
    reference, for selftest's float64 model)."""
    if x.dtype == torch.float64:
        return reference(x, stored, bias).to(x.device)
    codes, scales = unpack(stored)
    y = torch.ops.aten._weight_int8pack_mm(x.contiguous(), codes, scales.to(x.dtype))
    return y if bias is None else y + bias.to(y.dtype)


def reference(x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return float64_linear(x, dequantize(stored), bias)
