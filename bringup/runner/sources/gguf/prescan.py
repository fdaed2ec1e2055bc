"""The GGUF pre-scan: a file's header walked with bounded struct reads before anything is built from it.

Every count and length the file claims is checked against the bytes left before a byte of it is read, and against a
cap (below), so a header claiming 10^9 array items, or a vocabulary of 10^7 tokens, is one line after reading a few
bytes instead of gigabytes of Python objects. What is left is read into plain values: metadata as the Python values
gguf's reader gives (`int`, `float`, `bool`, `str`, lists of them), and the tensor index (tensor_index.py).

The caps, each well above what real files hold:
- keys: 65,536 (a model file has 20-60); a key at most 65,535 bytes (the GGUF specification's limit);
- a string at most 16 MiB (the longest real ones are chat templates, which bringup caps at 4 MiB);
- a `tokenizer.*` array at most 2^20 = 1,048,576 items: four times the largest vocabulary in use (Gemma 3's
  262,144) and its merges; any other array at most 65,536 (per-layer values, tags, languages);
- all arrays together at most 4 x 2^20 items (tokens, types, merges, scores of a vocabulary at the cap), so the
  values built stay within a few hundred MB however the items are spread over keys.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bringup.errors import BringupError
from bringup.runner.sources.gguf.cursor import U64, Cursor
from bringup.runner.sources.gguf.tensor_index import TensorEntry, check_extents, read_tensor_index
from bringup.terminal_text import quoted

VERSIONS = (2, 3)  # version 1 had 32-bit counts; gguf's reader and llama.cpp read 2 and 3
MAX_KEYS = 65_536
MAX_KEY_BYTES = 65_535
MAX_STRING_BYTES = 16 * 2**20
MAX_VOCABULARY = 2**20
MAX_ARRAY = 65_536
MAX_ARRAY_ITEMS = 4 * MAX_VOCABULARY
VOCABULARY_PREFIX = "tokenizer."
MIN_ENTRY_BYTES = 8 + 4 + 1  # a key's length, its type and the smallest value: an empty key and a uint8
STRING, ARRAY = 8, 9
SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
SCALAR_LAYOUTS = {kind: struct.Struct(fmt) for kind, fmt in SCALARS.items()}
ELEMENTS = {kind: np.dtype("u1" if fmt == "<?" else fmt) for kind, fmt in SCALARS.items()}
BOOL = 7
DEFAULT_ALIGNMENT = 32
ALIGNMENT_KEY, UINT32 = "general.alignment", 4


@dataclass(frozen=True)
class GGUFHeader:
    """What the pre-scan read: the metadata, the tensor index and where the data section starts."""

    version: int
    metadata: dict[str, Any]
    tensors: list[TensorEntry]
    data_start: int
    alignment: int


def prescan(path: Path, buffer: mmap.mmap, type_sizes: dict[int, tuple[int, int]]) -> GGUFHeader:
    """The header of the GGUF file mapped in `buffer`; `type_sizes` are the GGML types' (block values, block bytes)."""
    cursor = Cursor(buffer, path)
    cursor.skip(4, "the magic")
    version = cursor.u32("the version")
    if version not in VERSIONS and version & 0xFFFF == 0:
        raise BringupError(f"{path} is a big-endian GGUF file; bringup reads little-endian ones (as llama.cpp writes "
                           "them on x86 and ARM): convert the model on a little-endian machine")
    if version not in VERSIONS:
        raise cursor.error(f"GGUF version {version}; bringup reads versions {' and '.join(map(str, VERSIONS))}")
    tensor_count = cursor.u64("the tensor count")
    key_count = cursor.u64("the metadata key count")
    if key_count > MAX_KEYS:
        raise _over_cap(path, f"{key_count:,} metadata keys", f"the {MAX_KEYS:,} a file may have")
    if key_count * MIN_ENTRY_BYTES > cursor.left():
        raise cursor.error(f"{key_count:,} metadata keys claimed, more than the {cursor.left()} bytes left can hold")
    metadata, alignment = _Metadata(cursor).read(key_count)
    tensors = read_tensor_index(cursor, tensor_count, type_sizes)
    data_start = cursor.pos + (-cursor.pos % alignment)
    check_extents(cursor, tensors, data_start, alignment)
    return GGUFHeader(version, metadata, tensors, data_start, alignment)


class _Metadata:
    """The key/value section, read entry by entry with the caps counted as it goes."""

    def __init__(self, cursor: Cursor) -> None:
        self.cursor = cursor
        self.items = 0  # array items read so far, all arrays together

    def read(self, count: int) -> tuple[dict[str, Any], int]:
        metadata: dict[str, Any] = {}
        alignment = DEFAULT_ALIGNMENT
        for index in range(count):
            key = self.cursor.text(f"metadata key {index}", MAX_KEY_BYTES)
            if key in metadata:
                raise self.cursor.error(f"metadata key {quoted(key)} appears twice")
            kind = self.cursor.u32(f"the type of {quoted(key)}")
            metadata[key] = self._value(key, kind)
            if key == ALIGNMENT_KEY:
                alignment = self._alignment(kind, metadata[key])
        return metadata, alignment

    def _value(self, key: str, kind: int) -> Any:
        what = f"metadata key {quoted(key)}"
        if kind == STRING:
            return self.cursor.text(what, MAX_STRING_BYTES)
        if kind == ARRAY:
            return self._array(key, what)
        if kind not in SCALAR_LAYOUTS:
            raise self.cursor.error(f"{what} has value type {kind}, which GGUF does not define")
        return self.cursor.unpack(SCALAR_LAYOUTS[kind], what)[0]

    def _array(self, key: str, what: str) -> list[Any]:
        element = self.cursor.u32(f"the element type of {what}")
        count = self.cursor.u64(f"the length of {what}")
        self._count(key, count)
        if element == STRING:
            return self._strings(count, what)
        if element not in ELEMENTS:
            kind = "arrays of arrays, which bringup does not read" if element == ARRAY else \
                f"element type {element}, which GGUF does not define"
            raise self.cursor.error(f"{what} is an array of {kind}")
        dtype = ELEMENTS[element]
        start = self.cursor.skip(count * dtype.itemsize, f"{what} ({count:,} items of {dtype.itemsize} bytes)")
        values = np.frombuffer(self.cursor.buffer, dtype, count, start)
        return (values != 0).tolist() if element == BOOL else values.tolist()

    def _count(self, key: str, count: int) -> None:
        cap, which = (MAX_VOCABULARY, "a tokenizer array") if key.startswith(VOCABULARY_PREFIX) else \
            (MAX_ARRAY, "any other metadata array")
        if count > cap:
            raise _over_cap(self.cursor.path, f"metadata array {quoted(key)} claims {count:,} items",
                            f"the {cap:,} {which} may hold")
        self.items += count
        if self.items > MAX_ARRAY_ITEMS:
            raise _over_cap(self.cursor.path, f"its metadata arrays reach {self.items:,} items at {quoted(key)}",
                            f"the {MAX_ARRAY_ITEMS:,} all arrays together may hold")

    def _strings(self, count: int, what: str) -> list[str]:
        """`count` strings, each length checked against the bytes left before it is read (the loop is the hot path
        of a 150,000-token vocabulary, so the cursor's checks are inlined)."""
        cursor, buffer = self.cursor, self.cursor.buffer
        if count * U64.size > cursor.left():
            raise cursor.error(f"{what} claims {count:,} strings, more than the {cursor.left()} bytes left can hold")
        pos, size, length_at = cursor.pos, cursor.size, U64.unpack_from
        values = []
        for index in range(count):
            if size - pos < U64.size:
                raise cursor.error(f"{what} ends at string {index} of {count:,}: the file ends at byte {size}")
            length = length_at(buffer, pos)[0]
            pos += U64.size
            if length > size - pos or length > MAX_STRING_BYTES:
                raise cursor.error(f"string {index} of {what} claims {length} bytes at byte {pos}; "
                                   f"{min(size - pos, MAX_STRING_BYTES)} are allowed there")
            values.append(cursor.decoded(pos, length, f"string {index} of {what}"))
            pos += length
        cursor.pos = pos
        return values

    def _alignment(self, kind: int, value: Any) -> int:
        if kind != UINT32:
            raise self.cursor.error(f"{ALIGNMENT_KEY} has value type {kind}; it must be a uint32 (type {UINT32})")
        if value == 0 or value & (value - 1):
            raise self.cursor.error(f"{ALIGNMENT_KEY} is {value}; it must be a power of two")
        return value


def _over_cap(path: Path, claim: str, cap: str) -> BringupError:
    return BringupError(f"{path}: {claim}, more than {cap}; refused before reading it: the file is corrupt or not "
                        "a language model: re-convert it")
