"""A model's identity from its files, cheaply: what tune's records and eval's entries are keyed by.

Each weight file counts by its name, its size and its bytes at both ends (the first and the last MiB: the header
with its tensor index, and the last tensors' values), so other weights of the same size are another model, and a
multi-GB checkpoint costs 2 MiB of reading per file. A GGUF file adds its tensor index (names, shapes, types,
offsets), which a large vocabulary in the metadata before it can push past the first MiB. A change confined to the
middle of a file is not seen: a tune record holds timings, and the replay still runs every correctness check.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.runner.model_files import MAX_JSON_BYTES, open_regular, read_bytes
from bringup.runner.sources.directory.loader import safetensors_files
from bringup.runner.sources.gguf.reader import is_gguf_path, open_gguf
from bringup.terminal_text import shown

END_BYTES = 1 << 20  # read at each end of a weight file


def model_files_sha256(model: Path | None) -> str:
    """The identity of what --model names: a model directory, a .gguf file, or None (the built-in model)."""
    if model is None:
        return builtin_sha256()
    if is_gguf_path(model):
        return gguf_sha256(model, open_gguf(model).tensors)
    return directory_sha256(model)


def builtin_sha256() -> str:
    """The built-in model is made by code, the same in every run: its name is its identity."""
    return hashlib.sha256(b"built-in").hexdigest()


def directory_sha256(model_dir: Path) -> str:
    """config.json as it is, and each weight file (the shard index's, else every *.safetensors) by its ends."""
    digest = hashlib.sha256(read_bytes(model_dir, "config.json", MAX_JSON_BYTES))
    for weights in safetensors_files(model_dir):
        digest.update(f"\0{weights.name}\0{ends_sha256(weights)}".encode())
    return digest.hexdigest()


def gguf_sha256(path: Path, tensors: Mapping[str, Any]) -> str:
    """The file by its ends, and its tensor index: each tensor's name, shape, type and offset (gguf's
    ReaderTensor, as the opened file holds them)."""
    digest = hashlib.sha256(f"{path.name}\0{ends_sha256(path.resolve())}".encode())
    for name, t in tensors.items():
        shape = ",".join(str(int(d)) for d in t.shape)
        digest.update(f"\0{name}\0{shape}\0{int(t.tensor_type)}\0{int(t.data_offset)}".encode())
    return digest.hexdigest()


def ends_sha256(real: Path) -> str:
    """sha256 of a file's size, its first END_BYTES and its last END_BYTES (the whole file when that is less)."""
    digest = hashlib.sha256()
    try:
        with open_regular(real, shown(real)) as f:
            size = os.fstat(f.fileno()).st_size
            digest.update(f"{size}\0".encode())
            digest.update(f.read(END_BYTES))
            if size > END_BYTES:
                f.seek(max(END_BYTES, size - END_BYTES))
                digest.update(f.read(END_BYTES))
    except OSError as exc:
        raise BringupError(f"{shown(real)} cannot be read: {shown(exc.strerror or exc)}") from None
    return digest.hexdigest()
