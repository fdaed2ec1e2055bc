"""Weight-only quantized storage for linear layers, as plain uint8 tensors (one per weight), and the module-level
reference that dequantizes and calls F.linear in float32 (what the host kernels are checked against).

int8: one row per output channel, its `in` codes (int8, symmetric) followed by a float32 scale:
      w = scale * q, scale = max|w| / 127, q = round(w / scale) clamped to [-127, 127].
int4: per output channel, `in / 32` blocks of 24 bytes: a float32 scale d, a float32 minimum m, then 16 bytes
      holding 32 codes q in [0, 15] (code j in the low nibble of byte j, code j + 16 in its high nibble):
      w = d * q + m, d = (max - min) / 15, m = min, q = round((w - m) / d) clamped to [0, 15].
      This is GGUF's Q4_1 exactly (w = d*q + m) and Q4_0 with m = -8d (w = d*(q - 8)), in the same nibble order,
      with d and m widened from float16 to float32 (exact).
Rounding is to nearest, ties to even (torch.round), from the weight as loaded (the plan dtype) in float32.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

INT4_GROUP = 32  # weights per int4 block (one scale and one minimum each)
INT4_BLOCK_BYTES = 8 + INT4_GROUP // 2  # float32 d, float32 m, 16 bytes of codes
SCALE_BYTES = 4  # the float32 scale ending each int8 row


def _bytes_of(t: torch.Tensor) -> torch.Tensor:
    """A float32 tensor [..., j] as its bytes [..., 4 * j] (uint8)."""
    return t.float().contiguous().view(torch.uint8)


def _floats_of(b: torch.Tensor) -> torch.Tensor:
    """Bytes [..., 4 * j] (uint8) as the float32 values [..., j] they hold."""
    return b.contiguous().view(torch.float32)


def quantize_int8(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] as int8 rows: [out, in + 4] uint8, each row its codes then its float32 scale."""
    w = w.detach().float()
    scale = w.abs().amax(dim=1, keepdim=True) / 127
    inverse = torch.where(scale > 0, 1 / scale, torch.zeros_like(scale))
    codes = torch.round(w * inverse).clamp(-127, 127).to(torch.int8)
    return torch.cat([codes.view(torch.uint8), _bytes_of(scale)], dim=1).contiguous()


def dequantize_int8(stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] that `quantize_int8` stored."""
    k = stored.shape[1] - SCALE_BYTES
    codes = stored[:, :k].contiguous().view(torch.int8).float()
    return codes * _floats_of(stored[:, k:])


def int4_why_not(in_features: int) -> str | None:
    if in_features % INT4_GROUP:
        return f"{in_features} input features are not a multiple of the int4 group of {INT4_GROUP}"
    return None


def pack_int4(scale: torch.Tensor, minimum: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """Blocks [out, in / 32] of d and m (float32) and codes [out, in / 32, 32] (0..15, uint8) as stored int4 rows."""
    nibbles = codes[..., : INT4_GROUP // 2] | (codes[..., INT4_GROUP // 2:] << 4)
    blocks = torch.cat([_bytes_of(scale.unsqueeze(-1)), _bytes_of(minimum.unsqueeze(-1)), nibbles], dim=-1)
    return blocks.reshape(blocks.shape[0], -1).contiguous()


def quantize_int4(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (in a multiple of 32) as int4 rows: [out, in / 32 * 24] uint8."""
    why = int4_why_not(w.shape[1])
    if why:
        raise ValueError(why)
    groups = w.detach().float().reshape(w.shape[0], -1, INT4_GROUP)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    scale = (high - low) / 15
    inverse = torch.where(scale > 0, 1 / scale, torch.zeros_like(scale))
    codes = torch.round((groups - low.unsqueeze(-1)) * inverse.unsqueeze(-1)).clamp(0, 15).to(torch.uint8)
    return pack_int4(scale, low, codes)


def dequantize_int4(stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] that `quantize_int4` (or a GGUF Q4 re-pack) stored."""
    blocks = stored.reshape(stored.shape[0], -1, INT4_BLOCK_BYTES)
    scale, minimum = _floats_of(blocks[..., 0:4]), _floats_of(blocks[..., 4:8])
    nibbles = blocks[..., 8:]
    codes = torch.cat([nibbles & 15, nibbles >> 4], dim=-1).float()
    return (codes * scale + minimum).reshape(stored.shape[0], -1)


def int4_in_features(stored: torch.Tensor) -> int:
    return stored.shape[1] // INT4_BLOCK_BYTES * INT4_GROUP


def reference_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ W^T + b in float32 from the dequantized weight, returned in x's dtype: the module-level reference."""
    y = F.linear(x.float(), weight, None if bias is None else bias.float())
    return y.to(x.dtype)
