"""A model directory is a jail: every file the loader reads is found here, resolved, checked and read under a cap.

A file of a model directory must resolve (after every symlink) to a regular file inside the directory, or it is
refused in one line naming it, before it is opened: a link out of the directory, a shard name with `..` or an
absolute path, a FIFO, a device node or a directory is never opened. Links inside the directory are followed.

One exception, for the Hugging Face hub cache: a snapshot directory `<repo>/snapshots/<revision>/` holds links
to `../../blobs/<hash>`, so when the model directory is such a snapshot (its parent is named `snapshots` and
`<repo>/blobs` is a directory) a link may also resolve into `<repo>/blobs/`. Nothing else outside is followed.

JSON and text files are read whole under a size cap; JSON must be UTF-8 and nest no deeper than MAX_JSON_DEPTH,
both checked before the parser recurses.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from bringup.errors import BringupError
from bringup.json_depth import json_depth
from bringup.terminal_text import shown

MAX_JSON_BYTES = 64 << 20  # config.json, generation_config.json, tokenizer_config.json, the shard index
MAX_JSON_DEPTH = 64  # published configs nest 4 deep; the parser recurses once per level
MAX_TEMPLATE_BYTES = 4 << 20  # a chat template file; published ones are a few KB
MAX_TOKENIZER_BYTES = 512 << 20  # tokenizer.json; the largest published ones are tens of MB
PairsHook = Callable[[list[tuple[str, Any]]], Any]  # json.loads' object_pairs_hook: an object's pairs -> its value


def model_roots(model_dir: Path) -> tuple[Path, ...]:
    """Where a model directory's files may resolve to: the directory itself and, for a hub cache snapshot, its
    repository's blobs/."""
    real = model_dir.resolve()
    blobs = real.parent.parent / "blobs"
    if real.parent.name == "snapshots" and blobs.is_dir() and not blobs.is_symlink():
        return real, blobs
    return (real,)


def has_entry(model_dir: Path, name: str) -> bool:
    """Whether the directory has an entry called `name` (a file, a link, even a broken one)."""
    return os.path.lexists(model_dir / name)


def model_file(model_dir: Path, name: str | Path) -> Path:
    """The real path of the regular file `name` of the model directory; BringupError (one line, naming the file)
    when it is missing, resolves outside the directory, or is not a regular file. Nothing is opened."""
    given = model_dir / name
    shown_name = shown(given)
    try:
        real = given.resolve(strict=True)
    except FileNotFoundError:
        why = "is a link to nothing" if os.path.lexists(given) else "is missing"
        raise BringupError(f"{shown_name} {why}; the model directory is incomplete: re-download it") from None
    except (OSError, RuntimeError) as exc:  # a link loop, a path too long, a permission denied on the way
        raise BringupError(f"{shown_name} cannot be resolved ({shown(exc)}); fix the model directory") from None
    if not any(real.is_relative_to(root) for root in model_roots(model_dir)):
        raise BringupError(f"{shown_name} resolves to {shown(real)}, outside the model directory {shown(model_dir)}; "
                           "a model may only read its own files: copy the file into the directory")
    kind = _kind(real)
    if kind != "regular file":
        raise BringupError(f"{shown_name} is a {kind}, not a regular file; a model's files must be regular files: "
                           "replace it with the real file")
    return real


def files_in(model_dir: Path, folder: str, pattern: str) -> list[Path]:
    """The names (relative to the model directory) of the entries of its sub-folder `folder` matching `pattern`,
    sorted; [] when there is no such folder. A folder that resolves outside the directory is refused unlisted."""
    if not has_entry(model_dir, folder):
        return []
    real = (model_dir / folder).resolve()
    if not any(real.is_relative_to(root) for root in model_roots(model_dir)):
        raise BringupError(f"{shown(model_dir / folder)} resolves to {shown(real)}, outside the model directory "
                           f"{shown(model_dir)}; a model may only read its own files: copy the folder into it")
    if not real.is_dir():
        return []
    return sorted(Path(folder) / p.name for p in real.glob(pattern))


def read_bytes(model_dir: Path, name: str | Path, max_bytes: int) -> bytes:
    """The bytes of the model file `name` (checked by model_file), refused when larger than `max_bytes`."""
    real, label = model_file(model_dir, name), shown(model_dir / name)
    try:
        with open_regular(real, label) as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise BringupError(f"{label} cannot be read: {shown(exc.strerror or exc)}") from None
    if len(data) > max_bytes:
        raise BringupError(f"{label} is larger than the {max_bytes >> 20} MiB bringup reads for this file; it is "
                           "not a real model file: replace it")
    return data


def open_regular(real: Path, label: str) -> BinaryIO:
    """`real` (a path model_file returned) opened for reading, checked again once open: a file swapped for a link
    or a FIFO after the check is refused, never blocked on."""
    fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    f = os.fdopen(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise BringupError(f"{label} changed into a non-regular file while being read; leave the model directory "
                           "alone while it loads")
    return f


def read_text(model_dir: Path, name: str | Path, max_bytes: int) -> str:
    """The model file `name` as UTF-8 text, under `max_bytes`."""
    raw = read_bytes(model_dir, name, max_bytes)
    try:
        return utf8(raw)
    except ValueError as exc:
        raise BringupError(f"{shown(model_dir / name)} {exc}; re-download or fix the file") from None


def read_json(model_dir: Path, name: str | Path, max_bytes: int = MAX_JSON_BYTES,
              max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The model file `name` parsed as JSON: at most `max_bytes`, UTF-8, nested at most `max_depth` deep."""
    raw = read_bytes(model_dir, name, max_bytes)
    try:
        return decode_json(raw, max_depth)
    except ValueError as exc:
        raise BringupError(f"{shown(model_dir / name)} {exc}; re-download or fix the file") from None


def read_json_text(model_dir: Path, name: str | Path, max_bytes: int, pairs_hook: PairsHook | None = None,
                   ) -> tuple[str, Any]:
    """The model file `name` as UTF-8 text and parsed as JSON (as read_json parses it, each object built by
    `pairs_hook` when given), for a file that is handed on as text once its content is checked."""
    raw = read_bytes(model_dir, name, max_bytes)
    try:
        text = utf8(raw)
        return text, _parsed(raw, text, MAX_JSON_DEPTH, pairs_hook)
    except ValueError as exc:
        raise BringupError(f"{shown(model_dir / name)} {exc}; re-download or fix the file") from None


def decode_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """`raw` parsed as JSON; ValueError saying why in a phrase ("is not UTF-8 text ...") when it is not UTF-8,
    nests deeper than `max_depth` (checked before the parser recurses) or is not JSON."""
    return _parsed(raw, utf8(raw), max_depth)


def _parsed(raw: bytes, text: str, max_depth: int, pairs_hook: PairsHook | None = None) -> Any:
    depth = json_depth(raw)
    if depth > max_depth:
        raise ValueError(f"nests {depth} levels deep, more than the {max_depth} a model file may")
    try:
        return json.loads(text, object_pairs_hook=pairs_hook)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"is not valid JSON ({shown(exc)})") from None


def utf8(raw: bytes) -> str:
    """`raw` decoded; ValueError naming the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"is not UTF-8 text (byte {exc.start} is {raw[exc.start:exc.start + 1]!r})") from None


def _kind(real: Path) -> str:
    mode = real.stat().st_mode
    kinds = ((stat.S_ISREG, "regular file"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO (named pipe)"),
             (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))
    return next((kind for test, kind in kinds if test(mode)), "special file")
