"""Opening a GGUF file: the `gguf` package imported only here, the file memory-mapped, and every way it can fail
(package missing, not a GGUF file, truncated, corrupt) one line naming the file."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.terminal_text import shown

MAGIC = b"GGUF"
INSTALL_HINT = "pip install 'bringup[gguf]'"


@dataclass(frozen=True)
class GGUFFile:
    """An opened GGUF file: its metadata as plain Python values and its tensors (gguf's ReaderTensor, by the
    file's own names, in file order)."""

    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, Any]


def gguf_package() -> Any:
    """The `gguf` package; BringupError saying how to install it when it is missing."""
    try:
        import gguf
    except ImportError:
        raise BringupError(f"reading a GGUF file needs the gguf package, which is not installed: {INSTALL_HINT}"
                           ) from None
    return gguf


def open_gguf(path: Path) -> GGUFFile:
    """`path` opened and its header checked against the file's size before any tensor is used."""
    if not path.exists():
        raise BringupError(f"GGUF file {path} does not exist; pass --model FILE.gguf with an existing file "
                           "(or a model directory)")
    if not path.is_file():
        raise BringupError(f"--model {path} is not a regular file; a GGUF model is one file ending in .gguf")
    size = path.stat().st_size
    _check_magic(path)
    gguf = gguf_package()
    try:
        reader = gguf.GGUFReader(str(path), "r")
        metadata = {name: field.contents() for name, field in reader.fields.items()}
        tensors = {t.name: t for t in reader.tensors}
    except Exception as exc:  # the package's parser on a damaged file: IndexError, ValueError, struct errors...
        raise _corrupt(path, f"{type(exc).__name__}: {shown(str(exc))[:160]}") from None
    for tensor in tensors.values():
        end = int(tensor.data_offset) + int(tensor.n_bytes)
        if end > size:
            raise _corrupt(path, f"tensor {tensor.name!r} ends at byte {end} but the file has {size} bytes")
    return GGUFFile(path, metadata, tensors)


def _check_magic(path: Path) -> None:
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as exc:
        raise BringupError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if head != MAGIC:
        raise BringupError(f"{path} is not a GGUF file: it starts with {head!r}, not {MAGIC!r}; pass a .gguf "
                           "model file (or a model directory)")


def _corrupt(path: Path, why: str) -> BringupError:
    return BringupError(f"{path} is not a readable GGUF file ({why}); the download is truncated or corrupt: "
                        f"re-download it ({os.path.getsize(path)} bytes here)")
