"""Quantized storage for linear layers, as plain uint8 tensors (one per weight), and the module-level reference
that the host kernels are checked against.

Both schemes work in blocks of GROUP = 32 input features, as llama.cpp's Q8_0 / Q4_0 / Q4_1 do, and quantize the
activations too: each row of x, per block of 32, to int8 codes with one float32 scale (a = da * qa, da = max|a| /
127, qa = round(a / da)), so a block's product is one exact integer dot product scaled once (what VNNI's
`vpdpbusd` computes). This is llama.cpp's own arithmetic for these files.

The values:
int8: w = d * q per block of 32, d = max|w over the block| / 127 rounded up to a float16 value (so no code
      passes 127), q = round(w / d) clamped to [-127, 127], computed from d as stored. GGUF's Q8_0 exactly (its d
      is float16), in its 34 bytes per 32 weights.
int4: w = d * q + m per group of 32 (or 64, 128: the int4_g64 / int4_g128 kinds), d = (max - min) / 15 and m = min,
      both float16, q = round((w - m) / d) clamped to [0, 15], computed from d and m as stored. With groups of 32,
      GGUF's Q4_1 exactly, and Q4_0 with m = -8d (w = d * (q - 8)).
Rounding is to nearest, ties to even (torch.round), in float32; codes are value * (1 / scale), as the kernels do.

The bytes: a weight [out, in] is stored as uint8 [out, row bytes] (int8: in + in / 16; int4: in / 32 * 20), the rows
in tiles of TILE = 16 (the last tile holds what is left), each tile's bytes interleaved so that one 64-byte load
holds the same 4 input features of 16 output rows: one `vpdpbusd` lane per output row, fed one broadcast 32-bit
word of x's codes. Per tile of r rows, per block of 32 input features, in turn:
int8: r float16 scales; then 8 groups (features 4g..4g+3), each the 4 codes of every row of the tile, stored
      as q + 128 (unsigned: the kernel takes 128 * sum(x's codes) off; `vpdpbusd` multiplies unsigned by signed).
int4: per group of G inputs: r float16 d; r float16 m; then, per block of 32 of the group, 4 groups of 4 bytes of
      every row: byte c of group h holds code 4h + c of the block in its low nibble and code 16 + 4h + c in its
      high nibble (GGUF's nibble order, byte for byte, within a row).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.runner.weights.kinds import INT4_GROUP_SIZES, INT4_KINDS, INT8

GROUP = 32  # input features per block, for weights and activations alike
TILE = 16  # output rows interleaved in one tile
WORD = 4  # the bytes of one row side by side in a group: what one 32-bit lane of `vpdpbusd` sums
INT8_SCALE_BYTES = 2  # one float16 scale per row per block
INT4_SCALE_BYTES = 2  # float16 d and float16 m per row per block
INT4_GROUPS = dict(zip(INT4_KINDS, INT4_GROUP_SIZES, strict=True))  # each int4 kind's inputs per d and m
# each scheme's parts per row per block, in stored order: (groups, bytes per group)
INT8_PARTS = ((1, INT8_SCALE_BYTES), (GROUP // WORD, WORD))

INT8_OFFSET = 128  # int8 codes are stored as q + 128
# the kernels' format code for each kind (their dims / format argument): int8 1, the int4 kinds 2, 3, ...
KERNEL_FORMATS = {INT8: 1, **{kind: 2 + n for n, kind in enumerate(INT4_KINDS)}}


def int4_parts(group: int) -> tuple[tuple[int, int], ...]:
    return (1, INT4_SCALE_BYTES), (1, INT4_SCALE_BYTES), (group // 2 // WORD, WORD)


PARTS = {INT8: INT8_PARTS, **{kind: int4_parts(group) for kind, group in INT4_GROUPS.items()}}


def _group_bytes(kind: str) -> int:
    """A row's bytes per weight group of `kind` (its scales and codes)."""
    return sum(groups * size for groups, size in PARTS[kind])


def row_bytes(kind: str, in_features: int) -> int:
    """The stored bytes of one output row of `kind` (int8 or an int4 kind)."""
    return in_features // INT4_GROUPS.get(kind, GROUP) * _group_bytes(kind)


def in_features(stored: torch.Tensor, kind: str) -> int:
    """The input features of a weight stored as `kind`: row_bytes undone."""
    return stored.shape[1] // _group_bytes(kind) * INT4_GROUPS.get(kind, GROUP)


def group_why_not(in_features: int, group: int = GROUP) -> str | None:
    if in_features % group:
        return f"{in_features} input features are not a multiple of the quantization block of {group}"
    return None


def _require_groups(w: torch.Tensor, group: int = GROUP) -> None:
    why = group_why_not(w.shape[-1], group)
    if why:
        raise ValueError(why)


def _inverse(scale: torch.Tensor) -> torch.Tensor:
    return torch.where(scale > 0, 1 / scale, torch.zeros_like(scale))


def _tile_spans(rows: int) -> list[tuple[int, int, int]]:
    """(first row, end row, rows per tile) of the whole tiles of TILE rows, then of the last, shorter tile."""
    whole = rows // TILE * TILE
    spans = [(0, whole, TILE), (whole, rows, rows - whole)]
    return [span for span in spans if span[1] > span[0]]


def _interleave(parts: list[torch.Tensor]) -> torch.Tensor:
    """Per-row parts [out, blocks, groups, bytes] (uint8) as the stored tiles [out, row bytes]."""
    rows, blocks = parts[0].shape[:2]
    stored = []
    for first, end, height in _tile_spans(rows):
        tiles = [p[first:end].reshape(-1, height, *p.shape[1:]).permute(0, 2, 3, 1, 4)
                 .reshape(-1, blocks, p[0, 0].numel() * height) for p in parts]
        stored.append(torch.cat(tiles, dim=-1).reshape(end - first, -1))
    return torch.cat(stored).contiguous()


def _deinterleave(stored: torch.Tensor, shapes: tuple[tuple[int, int], ...]) -> list[torch.Tensor]:
    """The stored tiles [out, row bytes] as their per-row parts [out, blocks, groups, bytes], undoing _interleave."""
    rows, per_block = stored.shape[0], sum(g * b for g, b in shapes)
    blocks = stored.shape[1] // per_block
    pieces: list[list[torch.Tensor]] = [[] for _ in shapes]
    for first, end, height in _tile_spans(rows):
        tiles = stored[first:end].reshape(-1, blocks, per_block * height)
        split = tiles.split([g * b * height for g, b in shapes], dim=-1)
        for piece, part, (g, b) in zip(pieces, split, shapes, strict=True):
            piece.append(part.reshape(-1, blocks, g, height, b).permute(0, 3, 1, 2, 4).reshape(end - first, blocks,
                                                                                              g, b))
    return [torch.cat(piece) for piece in pieces]


def _joined(parts: list[torch.Tensor]) -> torch.Tensor:
    """Per-row parts [out, blocks, groups, bytes] as untiled rows [out, row bytes]: each row's blocks in turn, each
    block its parts in turn (the form rows are joined and reordered in before they are tiled)."""
    return torch.cat([p.reshape(*p.shape[:2], -1) for p in parts], dim=-1).reshape(parts[0].shape[0], -1)


def tile_rows(rows: torch.Tensor, scheme: str) -> torch.Tensor:
    """Untiled rows of `scheme` ("int8", "int4"; pack_* with tiled=False) as the stored tiles."""
    shapes = PARTS[scheme]
    per_row = rows.reshape(rows.shape[0], -1, sum(g * b for g, b in shapes))
    pieces = per_row.split([g * b for g, b in shapes], dim=-1)
    return _interleave([p.reshape(*p.shape[:2], g, b) for p, (g, b) in zip(pieces, shapes, strict=True)])


def untile(stored: torch.Tensor, scheme: str) -> torch.Tensor:
    """The stored tiles of `scheme` as untiled rows: tile_rows undone."""
    return _joined(_deinterleave(stored, PARTS[scheme]))


def _bytes_of(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Values [out, blocks] as their bytes in `dtype`, [out, blocks, 1, size]."""
    return t.to(dtype).contiguous().view(torch.uint8).reshape(*t.shape, 1, -1)


def _float16_values(name: str, scheme: str, t: torch.Tensor) -> None:
    if not torch.equal(t.half().float(), t.float()):
        raise ValueError(f"{scheme} stores each block's {name} as float16; these values are not float16 values")


def pack_int8(scale: torch.Tensor, codes: torch.Tensor, tiled: bool = True) -> torch.Tensor:
    """Scales [out, in / 32] (float16 values) and codes [out, in] (int8) as stored int8 tiles [out, in + in / 16]
    (uint8), or as untiled rows (tile_rows tiles them). ValueError for a scale that is not a float16 value."""
    _float16_values("scale", "int8", scale)
    offset = (codes.contiguous().view(torch.uint8) ^ INT8_OFFSET).reshape(codes.shape[0], -1, GROUP // WORD, WORD)
    parts = [_bytes_of(scale, torch.float16), offset]
    return _interleave(parts) if tiled else _joined(parts)


def _float16_at_least(value: torch.Tensor) -> torch.Tensor:
    """The least float16 value >= each float32 `value` (inf beyond float16's range)."""
    nearest = value.half()
    below = nearest.float() < value
    return torch.where(below, torch.nextafter(nearest, torch.full_like(nearest, float("inf"))), nearest)


def quantize_int8(w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (in a multiple of 32) as int8 tiles: [out, in + in / 16] uint8."""
    _require_groups(w)
    groups = w.detach().float().reshape(w.shape[0], -1, GROUP)
    scale = _float16_at_least(groups.abs().amax(dim=-1) / 127)
    if not scale.isfinite().all():
        raise ValueError("int8 stores each block's scale as float16; this weight's blocks exceed its range "
                         "(65504 x 127)")
    scale = scale.float()
    codes = torch.round(groups * _inverse(scale).unsqueeze(-1)).clamp(-127, 127).to(torch.int8)
    return pack_int8(scale, codes.reshape(w.shape[0], -1))


def unpack_int8(stored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The scales [out, in / 32] (float32, float16 values) and codes [out, in] (int8) that int8 tiles hold."""
    scale, offset = _deinterleave(stored, INT8_PARTS)
    codes = (offset ^ INT8_OFFSET).contiguous().view(torch.int8).reshape(stored.shape[0], -1)
    return scale.contiguous().view(torch.float16).float().reshape(stored.shape[0], -1), codes


def dequantize_int8(stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] that `quantize_int8` (or a GGUF Q8_0 re-pack) stored."""
    scale, codes = unpack_int8(stored)
    return (codes.float().reshape(*scale.shape, GROUP) * scale.unsqueeze(-1)).reshape(stored.shape[0], -1)


def pack_int4(scale: torch.Tensor, minimum: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """d and m [out, in / G] and codes [out, in / 32, 32] (0..15, uint8) as stored int4 tiles (G = 32 * in / 32 /
    the groups d has)."""
    return pack_int4_nibbles(scale, minimum, codes[..., : GROUP // 2] | (codes[..., GROUP // 2:] << 4))


def pack_int4_nibbles(scale: torch.Tensor, minimum: torch.Tensor, nibbles: torch.Tensor,
                      tiled: bool = True) -> torch.Tensor:
    """As pack_int4, the codes already two to a byte: nibbles [out, in / 32, 16] (code j low, code j + 16 high);
    tiled=False: untiled rows. d and m must be float16 values (ValueError otherwise: they are stored as float16)."""
    for name, t in (("scale", scale), ("minimum", minimum)):
        _float16_values(name, "int4", t)
    group = GROUP * nibbles.shape[1] // scale.shape[1]
    quads = nibbles.reshape(nibbles.shape[0], scale.shape[1], group // 2 // WORD, WORD)
    parts = [_bytes_of(scale, torch.float16), _bytes_of(minimum, torch.float16), quads]
    return _interleave(parts) if tiled else _joined(parts)


def quantize_int4(w: torch.Tensor, group: int = GROUP) -> torch.Tensor:
    """W [out, in] (in a multiple of `group`) as int4 tiles: [out, in / group * (4 + group / 2)] uint8."""
    _require_groups(w, group)
    groups = w.detach().float().reshape(w.shape[0], -1, group)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    scale, minimum = ((high - low) / 15).half(), low.half()
    if not (scale.isfinite().all() and minimum.isfinite().all()):
        raise ValueError("int4 stores each block's scale and minimum as float16; this weight's blocks exceed its "
                         "range (65504)")
    scale, minimum = scale.float(), minimum.float()
    shifted = (groups - minimum.unsqueeze(-1)) * _inverse(scale).unsqueeze(-1)
    codes = torch.round(shifted).clamp(0, 15).to(torch.uint8)
    return pack_int4(scale, minimum, codes.reshape(w.shape[0], -1, GROUP))


def unpack_int4(stored: torch.Tensor, group: int = GROUP) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """d and m [out, in / group] (float32, float16 values) and codes [out, in / 32, 32] (0..15, uint8) of int4
    tiles."""
    scale, minimum, quads = _deinterleave(stored, int4_parts(group))
    d, m = (t.contiguous().view(torch.float16).float().reshape(stored.shape[0], -1) for t in (scale, minimum))
    nibbles = quads.reshape(stored.shape[0], -1, GROUP // 2)
    return d, m, torch.cat([nibbles & 15, nibbles >> 4], dim=-1)


def dequantize_int4(stored: torch.Tensor, group: int = GROUP) -> torch.Tensor:
    """The float32 weight [out, in] that `quantize_int4` (or a GGUF Q4 re-pack) stored."""
    d, m, codes = unpack_int4(stored, group)
    values = codes.float().reshape(stored.shape[0], d.shape[1], group)
    return (values * d.unsqueeze(-1) + m.unsqueeze(-1)).reshape(stored.shape[0], -1)


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
