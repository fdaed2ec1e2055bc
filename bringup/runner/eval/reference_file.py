"""The reference file `--save-reference` writes and `--reference FILE` reads: per scored position the top-k
log-probabilities (ids int32, values float32) and the log-probability of the actual next token, in safetensors,
with a JSON header saying what it was made from (text, tokens, tokenizer, windows, model, dtype, device, versions).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

import torch

from bringup.bounded_file import FileRefused, regular_size
from bringup.errors import BringupError
from bringup.profiles.profile_file import NotAProfileFile, replace_bytes
from bringup.runner.eval.divergence import TopK
from bringup.runner.eval.reference_header import SCHEMA, HeaderRefused, ReferenceHeader, header_from_json, parse_header
from bringup.runner.eval.reference_rows import TENSORS, RowsRefused, check_names, rows_from_tensors
from bringup.terminal_text import quoted, shown

METADATA_KEY = "bringup.eval"
DEFAULT_K = 32
MAX_REFERENCE_BYTES = 2 << 30  # 100k positions at k=1024 is 0.8 GiB; the default k=32 keeps a book under 50 MB
T = TypeVar("T")
SAVE_AGAIN = "the file is damaged or was not saved by bringup: save it again with `bringup eval --save-reference`"


def save_reference(path: Path, header: ReferenceHeader, rows: TopK) -> None:
    """Written whole or not at all: a temp file beside `path`, then a rename."""
    from safetensors.torch import save

    data = save({"top_ids": rows.ids.to(torch.int32).contiguous(), "top_logprobs": rows.logprobs.contiguous(),
                 "target_logprobs": rows.target_logprobs.contiguous()},
                metadata={METADATA_KEY: json.dumps(asdict(header), sort_keys=True)})
    try:
        replace_bytes(path, data)
    except NotAProfileFile as exc:
        raise BringupError(f"--save-reference {path}: {exc}; give a regular file path") from None


def check_writable(path: Path, inputs: list[Path]) -> None:
    """Refuse an output path that cannot be written, or that is one of the run's `inputs` (the reference it
    reads, its text, the profile), before any work is done."""
    if any(os.path.realpath(path) == os.path.realpath(given) for given in inputs):
        raise BringupError(f"--save-reference {path}: is a file this run reads; give another path")
    if path.is_dir():
        raise BringupError(f"--save-reference {path}: is a directory; give a file path such as {path}/ref.safetensors")
    if not path.parent.is_dir():
        raise BringupError(f"--save-reference {path}: the directory {path.parent} does not exist; create it or "
                           "give another path")
    if not os.access(path.parent, os.W_OK):
        raise BringupError(f"--save-reference {path}: the directory {path.parent} is not writable; give a "
                           "writable path")


def load_reference(path: Path) -> tuple[ReferenceHeader, TopK]:
    from safetensors import SafetensorError, safe_open

    try:
        size = regular_size(path)
    except FileRefused as exc:
        raise BringupError(f"--reference {quoted(path)} {exc}; give `float64` or a file saved by --save-reference"
                           ) from None
    if size > MAX_REFERENCE_BYTES:
        raise BringupError(f"--reference {path}: {size} bytes, over the {MAX_REFERENCE_BYTES >> 30} GiB "
                           "a reference file may have; give a file saved by --save-reference")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            names = list(f.keys())
            header = _header(path, metadata)
            _refused_unless(path, check_names, names)
            tensors = {name: f.get_tensor(name) for name in TENSORS}
    except (SafetensorError, OSError, ValueError) as exc:
        raise BringupError(f"--reference {path}: not a safetensors file ({str(exc).splitlines()[0][:120]}); give "
                           "a file saved by `bringup eval --save-reference`") from None
    return header, _refused_unless(path, rows_from_tensors, tensors, header)


def _refused_unless(path: Path, check: Callable[..., T], *args: object) -> T:
    """`check(*args)`, its RowsRefused as one line naming the file."""
    try:
        return check(*args)
    except RowsRefused as exc:
        raise BringupError(f"--reference {path}: {exc}; {SAVE_AGAIN}") from None


def _header(path: Path, metadata: dict[str, str]) -> ReferenceHeader:
    what = f"--reference {path}: not a bringup eval reference"
    if METADATA_KEY not in metadata:
        raise BringupError(f"{what} (no {METADATA_KEY} header); give a file saved by "
                           "`bringup eval --save-reference`")
    try:
        fields = parse_header(metadata[METADATA_KEY])
        if not isinstance(fields, dict) or fields.get("schema") != SCHEMA:
            schema = fields.get("schema") if isinstance(fields, dict) else None
            raise BringupError(f"{what} of this version (schema {shown(repr(schema))[:60]}, this bringup reads "
                               f"{SCHEMA!r}); save it again with this version")
        return header_from_json(fields)
    except HeaderRefused as exc:
        raise BringupError(f"--reference {path}: {exc}; {SAVE_AGAIN}") from None
