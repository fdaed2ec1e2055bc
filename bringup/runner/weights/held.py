"""Linear weights a checkpoint already holds in a quantized kind's storage (a GGUF file's Q8_0 / Q4 blocks, re-packed
by formats/gguf_blocks.py): the kinds that keep that storage take it as it is, never through float and back.

A fused projection (q, k and v as one qkv_proj) concatenates its parts' rows, so it concatenates their stored rows
(untiled; the joined rows are tiled once); a part the checkpoint holds otherwise (an F16 v beside Q8_0 q and k) is
quantized for the kind and joins them. The rows are output channels, so quantizing a part alone stores what
quantizing the fused weight would.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from bringup.runner.weights.formats.device_int4 import from_int4
from bringup.runner.weights.formats.integer import tile_rows, untile
from bringup.runner.weights.kinds import INT4, INT4_DEQUANT, INT4_PACK_KERNELS, INT8, INT8_DEQUANT
from bringup.runner.weights.registry import place

# a kind -> the scheme's storage it keeps; the device's int4 kinds map that storage onto their own (device_int4.py)
HELD_AS = {INT8: INT8, INT8_DEQUANT: INT8, INT4: INT4, INT4_DEQUANT: INT4, **dict.fromkeys(INT4_PACK_KERNELS, INT4)}
MAPPED = {kind: (lambda rows, kernel=kernel: from_int4(kernel, rows)) for kind, kernel in INT4_PACK_KERNELS.items()}
StoredGetter = Callable[[str, str], "torch.Tensor | None"]  # (tensor name, scheme) -> its untiled rows, or None


@dataclass(frozen=True)
class LinearWeightTypes:
    """How a checkpoint stores the weights of the model's linear layers (its storage type names, e.g. GGUF's Q8_0,
    F16): the layers' projections, counted per type, and the head (lm_head, or the embedding it is tied to)."""

    layers: dict[str, int] = field(default_factory=dict)
    head: str | None = None


FLOAT_CHECKPOINT = LinearWeightTypes()  # nothing held pre-quantized: a model directory, the built-in model


def held_rows(names: list[str], kind: str, stored: StoredGetter | None,
              float_weight: Callable[[str], torch.Tensor], device: torch.device | None = None) -> torch.Tensor | None:
    """The weights `names` (fused in order) as `kind` stores them, when the checkpoint holds at least one of them in
    that storage already (the others quantized from `float_weight(name)`); None when it holds none so. A kind that
    maps the storage onto its own (MAPPED) gets it on `device`, where its packing runs."""
    scheme = HELD_AS.get(kind)
    if scheme is None or stored is None:
        return None
    parts = [stored(name, scheme) for name in names]
    if all(part is None for part in parts):
        return None
    rows = [untile(place(float_weight(name), scheme), scheme) if part is None else part.to(device or part.device)
            for name, part in zip(names, parts, strict=True)]
    joined = tile_rows(torch.cat(rows, 0), scheme)
    return MAPPED[kind](joined) if kind in MAPPED else joined
