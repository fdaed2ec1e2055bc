"""GGUF blocks re-packed, bit for bit, into the int8 / int4 storage of formats/integer.py, where that storage holds
their values exactly (ROUTES):

Q8_0 -> int8: the codes as they are, the float16 scale widened to float32 (exact).
Q5_0 -> int8: w = d * (q - 16) with 5-bit q: the int8 code q - 16 (in [-16, 15]) with the scale d.
Q4_0 -> int8: w = d * (q - 8): the int8 code q - 8 with the scale d.
Q4_0 -> int4: stored as Q4_1's d * q + m with m = -8d (exact in float16: a power of two times d).
Q4_1 -> int4: the nibbles, d and m as they are.

So `dequantize_int8` / `dequantize_int4` of the result equals gguf's own dequantization of the tensor, and nothing
is rounded a second time. No storage here holds Q5_1 (a minimum beside 5-bit codes) or the K-quants (scales per 16
or 32 values inside super-blocks of 256, themselves quantized to 4, 6 or 8 bits) as they are: those are dequantized
at load, and a scheme that stores them quantizes their values, as it would an F16 weight's.

The file's codes go to `pack_int8` / `pack_int4_nibbles`, so the stored layout is written in one place. They come
back as untiled rows: a projection's rows are reordered (rope) and joined with others (qkv) first; held.py tiles the
result once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bringup.runner.weights.formats.integer import GROUP, pack_int4_nibbles, pack_int8
from bringup.runner.weights.kinds import INT4, INT8

ROUTES = {"Q8_0": (INT8,), "Q5_0": (INT8,), "Q4_0": (INT4, INT8), "Q4_1": (INT4,)}  # the schemes holding each exactly
BLOCK_BYTES = {"Q8_0": 2 + GROUP, "Q5_0": 2 + 4 + GROUP // 2, "Q4_0": 2 + GROUP // 2, "Q4_1": 4 + GROUP // 2}
FLOAT_TYPES = ("F32", "F16", "BF16")


def holds(scheme: str, block_type: str) -> bool:
    """`scheme`'s storage holds `block_type`'s blocks exactly (re-packed, never rounded again)."""
    return scheme in ROUTES.get(block_type, ())


def is_quantized_type(block_type: str) -> bool:
    return block_type not in FLOAT_TYPES


def repacked(block_type: str, data: Any, scheme: str) -> torch.Tensor:
    """Rows of GGML `block_type` blocks (uint8 [rows, row bytes], as gguf's reader maps them) as untiled `scheme`
    rows; ValueError when `scheme` does not hold them exactly."""
    if not holds(scheme, block_type):
        raise ValueError(f"{scheme} storage does not hold {block_type} blocks exactly")
    copied = np.array(data, dtype=np.uint8)  # the file is mapped read-only
    blocks = torch.from_numpy(copied.reshape(len(data), -1, BLOCK_BYTES[block_type]))
    scale = _widened(blocks[..., 0:2])
    if scheme == INT8:
        return pack_int8(scale, _int8_codes(block_type, blocks), tiled=False)
    minimum = _widened(blocks[..., 2:4]) if block_type == "Q4_1" else -8 * scale
    return pack_int4_nibbles(scale, minimum, blocks[..., -GROUP // 2:], tiled=False)


def _int8_codes(block_type: str, blocks: torch.Tensor) -> torch.Tensor:
    """Each block's 32 values as signed codes of its scale, int8 [rows, in]."""
    rows = blocks.shape[0]
    if block_type == "Q8_0":
        return blocks[..., 2:].contiguous().view(torch.int8).reshape(rows, -1)
    nibbles = blocks[..., -GROUP // 2:].to(torch.int16)
    codes = torch.cat((nibbles & 0x0F, nibbles >> 4), dim=-1)  # code j in byte j's low nibble, j + 16 in its high one
    if block_type == "Q5_0":
        high = blocks[..., 2:6].to(torch.int64)
        fifth = (high[..., 0] | high[..., 1] << 8 | high[..., 2] << 16 | high[..., 3] << 24).unsqueeze(-1)
        codes = codes | (((fifth >> torch.arange(GROUP)) & 1) << 4).to(torch.int16)
        return (codes - 16).to(torch.int8).reshape(rows, -1)
    return (codes - 8).to(torch.int8).reshape(rows, -1)


def _widened(pairs: torch.Tensor) -> torch.Tensor:
    """Byte pairs [..., 2] (little-endian float16) as their float32 values [...]."""
    return pairs.contiguous().view(torch.float16).squeeze(-1).float()
