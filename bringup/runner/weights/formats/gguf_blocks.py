"""GGUF Q8_0, Q4_0 and Q4_1 blocks re-packed, bit for bit, into the int8 / int4 storage of formats/integer.py.

The codes are copied as they are (int4: the same nibble order); Q8_0's float16 scale is widened to float32 (exact),
Q4's d (and m) stay float16; Q4_0's w = d * (q - 8) is stored as Q4_1's d * q + m with m = -8d (exact in float16:
a power of two times d). So `dequantize_int8` / `dequantize_int4` of
the result equals gguf's own dequantization of the tensor, and nothing is rounded a second time.

The file's codes go to `pack_int8` / `pack_int4_nibbles` as they are (int4: already two to a byte, in the same
order), so the stored layout is written in one place. They come back as untiled rows: a projection's rows are
reordered (rope) and joined with others (qkv) first; held_weights tiles the result once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from bringup.runner.weights.formats.integer import GROUP, pack_int4_nibbles, pack_int8
from bringup.runner.weights.kinds import INT4, INT8

HELD_BLOCKS = {"Q8_0": INT8, "Q4_0": INT4, "Q4_1": INT4}  # a GGML block type -> the scheme storing it as it is
BLOCK_BYTES = {"Q8_0": 2 + GROUP, "Q4_0": 2 + GROUP // 2, "Q4_1": 4 + GROUP // 2}


def repacked(kind: str, data: Any) -> torch.Tensor:
    """Rows of GGML `kind` blocks (uint8 [rows, row bytes], as gguf's reader maps them) as untiled int8/int4 rows."""
    copied = np.array(data, dtype=np.uint8)  # the file is mapped read-only
    blocks = torch.from_numpy(copied.reshape(len(data), -1, BLOCK_BYTES[kind]))
    scale = _widened(blocks[..., 0:2])
    if kind == "Q8_0":
        return pack_int8(scale, blocks[..., 2:].contiguous().view(torch.int8).reshape(blocks.shape[0], -1), tiled=False)
    minimum = _widened(blocks[..., 2:4]) if kind == "Q4_1" else -8 * scale
    return pack_int4_nibbles(scale, minimum, blocks[..., -GROUP // 2:], tiled=False)


def _widened(pairs: torch.Tensor) -> torch.Tensor:
    """Byte pairs [..., 2] (little-endian float16) as their float32 values [...]."""
    return pairs.contiguous().view(torch.float16).squeeze(-1).float()
