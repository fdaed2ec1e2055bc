"""GGUF bytes written by hand, for the files no GGUF writer produces: counts and lengths that claim more than the file
holds, offsets past the end or wrapping around, tensors sharing bytes. Little-endian, version 3, as llama.cpp writes.

A metadata entry is built with `kv`, a tensor's index entry with `tensor_info`, and `gguf_bytes` puts them behind the
header, pads to the alignment and appends the data section."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

UINT8, UINT32, FLOAT32, BOOL, STRING, ARRAY, UINT64 = 0, 4, 6, 7, 8, 9, 10  # GGUF value types
F32, Q8_0 = 0, 8  # GGML tensor types
SCALAR_FORMATS = {UINT8: "<B", UINT32: "<I", FLOAT32: "<f", BOOL: "<?", UINT64: "<Q"}


def text(value: str | bytes) -> bytes:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return struct.pack("<Q", len(raw)) + raw


def kv(key: str, kind: int, value: object) -> bytes:
    """One metadata entry: `value` bytes written as they are after the type, a str (STRING) or a scalar of `kind`."""
    if isinstance(value, bytes):
        payload = value
    elif kind == STRING:
        payload = text(value)  # type: ignore[arg-type]
    else:
        payload = struct.pack(SCALAR_FORMATS[kind], value)
    return text(key) + struct.pack("<I", kind) + payload


def array(element: int, count: int, payload: bytes = b"") -> bytes:
    """An ARRAY value claiming `count` elements of type `element`, followed by `payload` (which may hold fewer)."""
    return struct.pack("<IQ", element, count) + payload


def tensor_info(name: str, dims: tuple[int, ...], kind: int, offset: int) -> bytes:
    return text(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset)


def gguf_bytes(kvs: Sequence[bytes], infos: Sequence[bytes] = (), data: bytes = b"", alignment: int = 32,
               version: int = 3) -> bytes:
    head = b"GGUF" + struct.pack("<IQQ", version, len(infos), len(kvs)) + b"".join(kvs) + b"".join(infos)
    return head + bytes(-len(head) % alignment) + data


def write(path: Path, kvs: Sequence[bytes], infos: Sequence[bytes] = (), data: bytes = b"", **options: int) -> Path:
    path.write_bytes(gguf_bytes(kvs, infos, data, **options))
    return path
