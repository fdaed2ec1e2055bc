"""The reference file `--save-reference` writes and `--reference FILE` reads: per scored position the top-k
log-probabilities (ids int32, values float32) and the log-probability of the actual next token, in safetensors,
with a JSON header saying what it was made from (text, tokens, tokenizer, windows, model, dtype, device, versions).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from bringup.errors import BringupError
from bringup.profiles.profile_file import NotAProfileFile, replace_bytes
from bringup.runner.eval.divergence import TopK

SCHEMA = "bringup.eval-reference/v1"
METADATA_KEY = "bringup.eval"
DEFAULT_K = 32
MAX_REFERENCE_BYTES = 2 << 30  # 100k positions at k=1024 is 0.8 GiB; the default k=32 keeps a book under 50 MB


@dataclass(frozen=True)
class ReferenceHeader:
    schema: str
    k: int
    ctx: int
    stride: int
    text_sha256: str
    tokens_sha256: str
    tokens: int  # tokens in the text (the first is never scored)
    tokenizer_sha256: str
    vocab_size: int
    model: str
    dtype: str
    device: str
    versions: dict[str, str]


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

    if not path.is_file():
        raise BringupError(f"--reference {path}: no such file; give `float64` or a file saved by --save-reference")
    if path.stat().st_size > MAX_REFERENCE_BYTES:
        raise BringupError(f"--reference {path}: {path.stat().st_size} bytes, over the {MAX_REFERENCE_BYTES >> 30} GiB "
                           "a reference file may have; give a file saved by --save-reference")
    try:
        with safe_open(str(path), framework="pt") as f:
            metadata = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open is not a dict)
    except (SafetensorError, OSError, ValueError) as exc:
        raise BringupError(f"--reference {path}: not a safetensors file ({str(exc).splitlines()[0][:120]}); give "
                           "a file saved by `bringup eval --save-reference`") from None
    header = _header(path, metadata)
    rows = _rows(path, tensors, header)
    return header, rows


def _header(path: Path, metadata: dict[str, str]) -> ReferenceHeader:
    what = f"--reference {path}: not a bringup eval reference"
    try:
        fields = json.loads(metadata[METADATA_KEY])
    except (KeyError, json.JSONDecodeError):
        raise BringupError(f"{what} (no {METADATA_KEY} header); give a file saved by "
                           "`bringup eval --save-reference`") from None
    if not isinstance(fields, dict) or fields.get("schema") != SCHEMA:
        schema = fields.get("schema") if isinstance(fields, dict) else None
        raise BringupError(f"{what} of this version (schema {schema!r}, this bringup reads {SCHEMA!r}); save it "
                           "again with this version")
    try:
        return ReferenceHeader(**fields)
    except TypeError as exc:
        raise BringupError(f"{what}: its header is malformed ({exc}); save it again") from None


def _rows(path: Path, tensors: dict[str, torch.Tensor], header: ReferenceHeader) -> TopK:
    ids, logprobs, targets = (tensors.get(n) for n in ("top_ids", "top_logprobs", "target_logprobs"))
    positions = header.tokens - 1
    if (ids is None or logprobs is None or targets is None or ids.shape != (positions, header.k)
            or logprobs.shape != ids.shape or targets.shape != (positions,)):
        raise BringupError(f"--reference {path}: its tensors do not match its header ({positions} positions x "
                           f"k={header.k}); the file is damaged: save it again")
    if bool((ids < 0).any()) or bool((ids >= header.vocab_size).any()):
        raise BringupError(f"--reference {path}: token ids outside its vocabulary of {header.vocab_size}; the file "
                           "is damaged: save it again")
    return TopK(ids.long(), logprobs.float(), targets.float())
