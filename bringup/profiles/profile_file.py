"""A profile's file on disk: only a regular file under a size cap is read; a write goes through links to the real
file, atomically, and keeps that file's mode."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from bringup.bounded_file import FileRefused, kind_of, read_bounded
from bringup.number_rule import NumberRefused, whole_number

MAX_PROFILE_BYTES = 256 << 20  # 256 MiB: a profile of every op on every dtype is ~70 MB
MAX_BYTES_VARIABLE = "BRINGUP_MAX_PROFILE_MB"


class NotAProfileFile(ValueError):
    """The path names something other than a regular file of a readable size; the message says what."""


def max_profile_bytes() -> int:
    """The size cap: MAX_PROFILE_BYTES, or $BRINGUP_MAX_PROFILE_MB mebibytes when that is a positive integer."""
    value = os.environ.get(MAX_BYTES_VARIABLE, "").strip()
    try:
        return whole_number(value, MAX_BYTES_VARIABLE, 1 << 40, low=1) << 20
    except NumberRefused:
        return MAX_PROFILE_BYTES


def read_text(path: Path) -> str:
    """The file's text, read by the one bounded reader (bringup/bounded_file.py): a regular file no larger than the
    cap. FileNotFoundError for a missing file, NotAProfileFile (the reason) for any other refusal, UnicodeDecodeError
    are the caller's to word."""
    cap = max_profile_bytes()
    try:
        data = read_bounded(path, cap, f"the {cap >> 20} MiB a profile may (set {MAX_BYTES_VARIABLE} to read a "
                                       "larger one)")
    except FileRefused as exc:
        if exc.missing:
            raise FileNotFoundError(str(exc)) from None
        raise NotAProfileFile(str(exc)) from None
    return data.decode("utf-8")


def real_target(path: Path) -> Path:
    """Where a write to `path` must land: through every symbolic link to the real file (which may not exist yet)."""
    return Path(os.path.realpath(path))


def default_mode() -> int:
    """The mode a new file gets from the umask, as `open` would give it."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def replace_text(path: Path, text: str) -> Path:
    """`replace_bytes` with `text` in UTF-8."""
    return replace_bytes(path, text.encode("utf-8"))


def replace_bytes(path: Path, data: bytes) -> Path:
    """Write `data` to the real file behind `path`: a temp file beside it, fsync, rename (a crash leaves the old file
    or the new one), with the old file's mode, or the umask's default for a new file. Returns the file written.
    Refuses (NotAProfileFile) to replace anything but a regular file; OSError is the caller's to word."""
    target = real_target(path)
    try:
        mode = stat.S_IMODE(_regular_mode(target))
    except FileNotFoundError:
        mode = default_mode()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    return target


def _regular_mode(target: Path) -> int:
    mode = os.stat(target).st_mode
    if not stat.S_ISREG(mode):
        raise NotAProfileFile(f"is {kind_of(mode)}, not a regular file")
    return mode
