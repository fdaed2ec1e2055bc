"""GGUF Q8_0, Q4_0 and Q4_1 blocks re-packed, bit for bit, into the int8 / int4 storage of model/quantized_weights.py.

The codes are copied as they are (int4: the same nibble order) and each block's float16 scale (and minimum) is
widened to float32, which is exact; Q4_0's w = d * (q - 8) is stored as Q4_1's d * q + m with m = -8d (exact in
float32: both are multiples of a float16's last place within 15 bits). So `dequantize_int8` / `dequantize_int4` of
the result equals gguf's own dequantization of the tensor, and nothing is rounded a second time.

The bytes are written straight into the layout quantized_weights.py's docstring gives (numpy slices: the file's blocks
are already that layout but for the scales' width), not through `pack_int8` / `pack_int4`, whose per-block
concatenations took a hundred times longer on a 576 x 1536 weight.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bringup.runner.model.linear_kinds import INT4, INT8
from bringup.runner.model.quantized_weights import GROUP, INT4_BLOCK_BYTES, INT8_SCALE_BYTES

HELD_BLOCKS = {"Q8_0": INT8, "Q4_0": INT4, "Q4_1": INT4}  # a GGML block type -> the scheme storing it as it is
BLOCK_BYTES = {"Q8_0": 2 + GROUP, "Q4_0": 2 + GROUP // 2, "Q4_1": 4 + GROUP // 2}
SCALE, MINIMUM, NIBBLES = slice(0, 4), slice(4, 8), slice(8, INT4_BLOCK_BYTES)  # an int4 block: float32 d, m, codes


def repacked(kind: str, data: Any) -> torch.Tensor:
    """Rows of GGML `kind` blocks (uint8 [rows, row bytes], as gguf's reader maps them) as stored int8/int4 rows."""
    blocks = np.asarray(data, dtype=np.uint8).reshape(len(data), -1, BLOCK_BYTES[kind])
    rows, count = blocks.shape[:2]
    scale = _widened(blocks[..., 0:2])
    if kind == "Q8_0":  # a row's codes, then its blocks' scales
        out = np.empty((rows, count * (GROUP + INT8_SCALE_BYTES)), dtype=np.uint8)
        out[:, : count * GROUP] = blocks[..., 2:].reshape(rows, -1)
        out[:, count * GROUP:] = scale.view(np.uint8).reshape(rows, -1)
        return torch.from_numpy(out)
    out = np.empty((rows, count, INT4_BLOCK_BYTES), dtype=np.uint8)
    out[..., SCALE] = scale.view(np.uint8)
    out[..., MINIMUM] = (_widened(blocks[..., 2:4]) if kind == "Q4_1" else -8 * scale).view(np.uint8)
    out[..., NIBBLES] = blocks[..., -GROUP // 2:]
    return torch.from_numpy(out.reshape(rows, -1))


def _widened(pairs: np.ndarray) -> np.ndarray:
    """Byte pairs [..., 2] (little-endian float16) as float32 values [..., 1]."""
    return np.ascontiguousarray(pairs).view("<f2").astype(np.float32)
