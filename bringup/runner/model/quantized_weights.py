"""Quantized storage for linear layers, as plain uint8 tensors (one per weight), and the module-level reference
that the host kernels are checked against.

Both schemes work in blocks of GROUP = 32 input features, as llama.cpp's Q8_0 / Q4_0 / Q4_1 do, and quantize the
activations too: each row of x, per block of 32, to int8 codes with one float32 scale (a = da * qa, da = max|a| /
127, qa = round(a / da)), so a block's product is one exact integer dot product scaled once (what VNNI's
`vpdpbusd` computes). This is llama.cpp's own arithmetic for these files, with float32 scales instead of float16.

int8: one row per output channel: its `in` codes (int8, symmetric) followed by `in / 32` float32 scales:
      w = d * q, d = max|w over the block| / 127, q = round(w / d) clamped to [-127, 127]. GGUF's Q8_0 exactly.
int4: per output channel, `in / 32` blocks of 24 bytes: a float32 scale d, a float32 minimum m, then 16 bytes
      holding 32 codes q in [0, 15] (code j in the low nibble of byte j, code j + 16 in its high nibble):
      w = d * q + m, d = (max - min) / 15, m = min, q = round((w - m) / d) clamped to [0, 15].
      This is GGUF's Q4_1 exactly (w = d*q + m) and Q4_0 with m = -8d (w = d*(q - 8)), in the same nibble order,
      with d and m widened from float16 to float32 (exact).
Rounding is to nearest, ties to even (torch.round), from the value in float32; a scale is computed as
max / 127 (or / 15) in float32 and the codes as value * (1 / scale), the order the kernels compute them in.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

GROUP = 32  # input features per block, for weights and activations alike
INT4_BLOCK_BYTES = 8 + GROUP // 2  # float32 d, float32 m, 16 bytes of codes
INT8_SCALE_BYTES = 4  # one float32 scale per block of 32 codes, after the row's codes


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """A float32 tensor [..., j] as its bytes [..., 4 * j] (uint8)."""
    return t.float().contiguous().view(torch.uint8)


def _floats_of(b: torch.Tensor) -> torch.Tensor:
    """Bytes [..., 4 * j] (uint8) as the float32 values [..., j] they hold."""
    return b.contiguous().view(torch.float32)


def group_why_not(in_features: int) -> str | None:
    if in_features % GROUP:
        return f"{in_features} input features are not a multiple of the quantization block of {GROUP}"
    return None


def _require_groups(w: torch.Tensor) -> None:
    why = group_why_not(w.shape[-1])
    if why:
        raise ValueError(why)


def _inverse(scale: torch.Tensor) -> torch.Tensor:
    return torch.where(scale > 0, 1 / scale, torch.zeros_like(scale))


def pack_int8(scale: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Scales [out, in / 32] (float32) and codes [out, in] (int8) as stored int8 rows [out, in + in / 8] (uint8)."""
    return torch.cat([codes.contiguous().view(torch.uint8), _bytes_of(scale)], dim=1).contiguous()


def quantize_int8(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (in a multiple of 32) as int8 rows: [out, in + in / 8] uint8."""
    _require_groups(w)
    groups = w.detach().float().reshape(w.shape[0], -1, GROUP)
    scale = groups.abs().amax(dim=-1) / 127
    codes = torch.round(groups * _inverse(scale).unsqueeze(-1)).clamp(-127, 127).to(torch.int8)
    return pack_int8(scale, codes.reshape(w.shape[0], -1))


def int8_in_features(stored: torch.Tensor) -> int:
    return stored.shape[1] * GROUP // (GROUP + INT8_SCALE_BYTES)


def dequantize_int8(stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] that `quantize_int8` (or a GGUF Q8_0 re-pack) stored."""
    k = int8_in_features(stored)
    codes = stored[:, :k].contiguous().view(torch.int8).float().reshape(stored.shape[0], -1, GROUP)
    return (codes * _floats_of(stored[:, k:]).unsqueeze(-1)).reshape(stored.shape[0], k)


def pack_int4(scale: torch.Tensor, minimum: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Blocks [out, in / 32] of d and m (float32) and codes [out, in / 32, 32] (0..15, uint8) as stored int4 rows."""
    return pack_int4_nibbles(scale, minimum, codes[..., : GROUP // 2] | (codes[..., GROUP // 2:] << 4))


def pack_int4_nibbles(scale: torch.Tensor, minimum: torch.Tensor, nibbles: torch.Tensor) -> torch.Tensor:
    """As pack_int4, the codes already two to a byte: nibbles [out, in / 32, 16] (code j low, code j + 16 high)."""
    blocks = torch.cat([_bytes_of(scale.unsqueeze(-1)), _bytes_of(minimum.unsqueeze(-1)), nibbles], dim=-1)
    return blocks.reshape(blocks.shape[0], -1).contiguous()


def quantize_int4(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (in a multiple of 32) as int4 rows: [out, in / 32 * 24] uint8."""
    _require_groups(w)
    groups = w.detach().float().reshape(w.shape[0], -1, GROUP)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    scale = (high - low) / 15
    codes = torch.round((groups - low.unsqueeze(-1)) * _inverse(scale).unsqueeze(-1)).clamp(0, 15).to(torch.uint8)
    return pack_int4(scale, low, codes)


def dequantize_int4(stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] that `quantize_int4` (or a GGUF Q4 re-pack) stored."""
    blocks = stored.reshape(stored.shape[0], -1, INT4_BLOCK_BYTES)
    scale, minimum = _floats_of(blocks[..., 0:4]), _floats_of(blocks[..., 4:8])
    nibbles = blocks[..., 8:]
    codes = torch.cat([nibbles & 15, nibbles >> 4], dim=-1).float()
    return (codes * scale + minimum).reshape(stored.shape[0], -1)


def int4_in_features(stored: torch.Tensor) -> int:
    return stored.shape[1] // INT4_BLOCK_BYTES * GROUP


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def quantize_activations(x: torch.Tensor) -> torch.Tensor:
    """x [..., k] (k a multiple of 32) as the kernels see it: each block of 32 rounded to int8 codes with a
    scale, returned dequantized, in float32 (float64 for a float64 x: selftest's reference)."""
    groups = x.to(_compute_dtype(x)).reshape(*x.shape[:-1], -1, GROUP)
    scale = groups.abs().amax(dim=-1, keepdim=True) / 127
    codes = torch.round(groups * _inverse(scale)).clamp(-127, 127)
    return (codes * scale).reshape(x.shape)


def reference_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ W^T + b from the dequantized weight and x's quantized blocks, in float32 (float64 for a float64 x),
    returned in x's dtype: the module-level reference."""
    dtype = _compute_dtype(x)
    y = F.linear(quantize_activations(x), weight.to(dtype), None if bias is None else bias.to(dtype))
    return y.to(x.dtype)
