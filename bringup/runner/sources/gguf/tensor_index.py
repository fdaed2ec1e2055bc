"""A GGUF file's tensor index, read by the pre-scan: each tensor's name, dimensions, GGML type and offset checked,
then every tensor's bytes placed inside the data section, aligned, and apart from every other tensor's.

Offsets are added as Python integers, so an offset near 2^64 lands past the file's end instead of wrapping around
onto the header; two tensors sharing bytes (a file whose tensors all sit at offset 0) are refused by name."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from itertools import pairwise

from bringup.runner.sources.gguf.cursor import Cursor
from bringup.terminal_text import quoted

MAX_TENSORS = 65_536  # a 600B mixture of experts has about 1,500 (experts are stacked in one tensor per layer)
MAX_NAME_BYTES = 63  # llama.cpp's GGML_MAX_NAME (64) with its terminating NUL
MAX_DIMS = 4  # GGML_MAX_DIMS
MIN_INFO_BYTES = 8 + 4 + 8 + 4 + 8  # an empty name, n_dims, one dimension, the type, the offset
TYPE_AND_OFFSET = struct.Struct("<IQ")


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dims: tuple[int, ...]  # GGUF order: the innermost (contiguous) dimension first
    type_id: int  # a GGMLQuantizationType value
    offset: int  # from the start of the data section
    n_bytes: int


def read_tensor_index(cursor: Cursor, count: int, type_sizes: dict[int, tuple[int, int]]) -> list[TensorEntry]:
    if count > MAX_TENSORS:
        raise cursor.error(f"{count:,} tensors claimed, more than the {MAX_TENSORS:,} bringup reads")
    if count * MIN_INFO_BYTES > cursor.left():
        raise cursor.error(f"{count:,} tensors claimed, more than the {cursor.left()} bytes left can describe")
    entries: dict[str, TensorEntry] = {}
    for index in range(count):
        entry = _entry(cursor, index, type_sizes)
        if entry.name in entries:
            raise cursor.error(f"tensor {quoted(entry.name)} appears twice in the tensor index")
        entries[entry.name] = entry
    return list(entries.values())


def _entry(cursor: Cursor, index: int, type_sizes: dict[int, tuple[int, int]]) -> TensorEntry:
    name = cursor.text(f"the name of tensor {index}", MAX_NAME_BYTES)
    what = f"tensor {quoted(name)}"
    n_dims = cursor.u32(f"the dimension count of {what}")
    if not 1 <= n_dims <= MAX_DIMS:
        raise cursor.error(f"{what} has {n_dims} dimensions; a GGUF tensor has 1 to {MAX_DIMS}")
    dims = cursor.unpack(struct.Struct(f"<{n_dims}Q"), f"the dimensions of {what}")
    type_id, offset = cursor.unpack(TYPE_AND_OFFSET, f"the type and offset of {what}")
    if type_id not in type_sizes:
        raise cursor.error(f"{what} has GGML type {type_id}, which the gguf package does not know")
    block_values, block_bytes = type_sizes[type_id]
    if min(dims) < 1 or dims[0] % block_values:
        raise cursor.error(f"{what} has dimensions {list(dims)}; each must be at least 1 and the first a multiple "
                           f"of its type's {block_values}-value blocks")
    return TensorEntry(name, tuple(dims), type_id, offset, math.prod(dims) // block_values * block_bytes)


def check_extents(cursor: Cursor, entries: list[TensorEntry], data_start: int, alignment: int) -> None:
    """Every tensor's [start, end) aligned, inside the file, and disjoint from the others'."""
    for entry in entries:
        if entry.offset % alignment:
            raise cursor.error(f"tensor {quoted(entry.name)} starts at offset {entry.offset}, not a multiple of the "
                               f"file's alignment {alignment}")
        end = data_start + entry.offset + entry.n_bytes
        if end > cursor.size:
            raise cursor.error(f"tensor {quoted(entry.name)} ends at byte {end} but the file has {cursor.size} bytes")
    ordered = sorted(entries, key=lambda e: e.offset)
    for before, after in pairwise(ordered):
        if after.offset < before.offset + before.n_bytes:
            raise cursor.error(f"tensors {quoted(before.name)} ({before.n_bytes} bytes at offset {before.offset}) and "
                               f"{quoted(after.name)} (at offset {after.offset}) share bytes; each tensor needs bytes "
                               "of its own")
