"""NaN/Inf in a GGUF tensor, counted without dequantizing it where its block layout allows.

In Q8_0, Q4_0 and Q4_1 blocks every value is a float16 scale times a small integer (plus, in Q4_1, a float16
minimum): a value is NaN or infinite exactly when its block's scale or minimum is (65504 x 127 + 65504 is finite in
float32), so a block with one counts as all its values. Float tensors are counted as they are stored; BF16 (raw bytes
here) is dequantized first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from bringup.runner.sources.directory.validate import count_nonfinite
from bringup.runner.sources.gguf.reader import gguf_package

SCALE_BYTES = {"Q8_0": (0,), "Q4_0": (0,), "Q4_1": (0, 2)}  # where each block's float16 scale (and minimum) start
STORED_FLOATS = ("F32", "F16")


def nonfinite_count(tensor: Any, dequantized: Callable[[], torch.Tensor]) -> int:
    """NaN/Inf values in a gguf ReaderTensor; `dequantized()` gives its values when the layout cannot say."""
    kind = tensor.tensor_type.name
    if kind in STORED_FLOATS:
        return int(np.count_nonzero(~np.isfinite(np.asarray(tensor.data))))
    if kind not in SCALE_BYTES:
        return count_nonfinite(dequantized())
    block_values, block_bytes = gguf_package().GGML_QUANT_SIZES[tensor.tensor_type]
    blocks = np.asarray(tensor.data, dtype=np.uint8).reshape(-1, block_bytes)
    bad = np.zeros(len(blocks), dtype=bool)
    for start in SCALE_BYTES[kind]:
        scales = np.ascontiguousarray(blocks[:, start:start + 2]).view(np.float16).reshape(-1)
        bad |= ~np.isfinite(scales)
    return int(bad.sum()) * block_values
