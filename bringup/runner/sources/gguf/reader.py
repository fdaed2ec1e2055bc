"""Opening a GGUF file: the `gguf` package imported only here (for its GGML types, their block sizes and
dequantization), the header pre-scanned with bounded reads (prescan.py), and the tensors memory-mapped. Every way
it can fail (package missing, not a GGUF file, truncated, corrupt, claims past its caps) is one line naming the
file."""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bringup.errors import BringupError
from bringup.runner.sources.gguf.prescan import GGUFHeader, prescan
from bringup.runner.sources.gguf.tensor_index import TensorEntry

MAGIC = b"GGUF"
INSTALL_HINT = "pip install 'bringup[gguf]'"
GGUF_SUFFIX = ".gguf"
ITEM_TYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8, "I16": np.int16,
              "I32": np.int32, "I64": np.int64}  # the types whose data gguf's reader maps as numbers, not bytes


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor as gguf's ReaderTensor describes it: `shape` in GGUF order (innermost first); `data` a read-only
    view of the mapped file, numbers for the float and integer types, rows of block bytes for the others."""

    name: str
    tensor_type: Any  # gguf.GGMLQuantizationType
    shape: tuple[int, ...]
    n_bytes: int
    data_offset: int  # from the start of the file
    data: np.ndarray


@dataclass(frozen=True)
class GGUFFile:
    """An opened GGUF file: its metadata as plain Python values and its tensors by the file's own names, in file
    order."""

    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor]


def is_gguf_path(path: Path) -> bool:
    """Whether --model names a GGUF file (by its name; a directory so named is a model directory)."""
    return path.suffix.lower() == GGUF_SUFFIX and not path.is_dir()


def gguf_package() -> Any:
    """The `gguf` package; BringupError saying how to install it when it is missing."""
    try:
        import gguf
    except ImportError:
        raise BringupError(f"reading a GGUF file needs the gguf package, which is not installed: {INSTALL_HINT}"
                           ) from None
    return gguf


def open_gguf(path: Path) -> GGUFFile:
    """`path` opened, its header pre-scanned against the file's size and bringup's caps before anything is built."""
    if not path.exists():
        raise BringupError(f"GGUF file {path} does not exist; pass --model FILE.gguf with an existing file "
                           "(or a model directory)")
    if not path.is_file():
        raise BringupError(f"--model {path} is not a regular file; a GGUF model is one file ending in .gguf")
    _check_magic(path)
    gguf = gguf_package()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
        header = prescan(path, buffer, {int(kind): sizes for kind, sizes in gguf.GGML_QUANT_SIZES.items()})
    mapped = np.memmap(path, mode="r") if header.tensors else np.empty(0, np.uint8)
    tensors = {e.name: _tensor(gguf, mapped, header, e) for e in header.tensors}
    return GGUFFile(path, header.metadata, tensors)


def _tensor(gguf: Any, mapped: np.ndarray, header: GGUFHeader, entry: TensorEntry) -> GGUFTensor:
    kind = gguf.GGMLQuantizationType(entry.type_id)
    start = header.data_start + entry.offset
    rows = tuple(reversed(entry.dims))  # numpy order: the outermost dimension first
    item = ITEM_TYPES.get(kind.name)
    if item is None:
        block_values, block_bytes = gguf.GGML_QUANT_SIZES[kind]
        rows = (*rows[:-1], rows[-1] // block_values * block_bytes)
        item = np.uint8
    data = mapped[start:start + entry.n_bytes].view(item).reshape(rows)
    return GGUFTensor(entry.name, kind, entry.dims, entry.n_bytes, start, data)


def _check_magic(path: Path) -> None:
    try:
        with open(path, "rb") as f:
            head = f.read(len(MAGIC))
    except OSError as exc:
        raise BringupError(f"{path} cannot be read: {exc.strerror or exc}") from None
    if head != MAGIC:
        raise BringupError(f"{path} is not a GGUF file: it starts with {head!r}, not {MAGIC!r}; pass a .gguf "
                           "model file (or a model directory)")
