"""The one reader for a file a user names (a profile, --chat-template, eval --text and --reference, a model's
config.json for export, an emulator spec): a regular file on disk, read up to a cap that is counted while reading.

The file is opened without blocking (a FIFO never stalls) and checked once open: a directory, a device, a FIFO, a
socket, or a file of the kernel's /proc or /sys (whose sizes say 0 and whose reads may fail or never end) is refused.
The cap stops the read itself, never trusting st_size. Every OS error becomes FileRefused, whose message is the
reason alone (`is a directory, not a regular file`), for the caller to put after the file's name and before what to
do. No torch: the emulator's spec is read with it at `import torch`.
"""

from __future__ import annotations

import errno
import os
import stat
from functools import cache
from pathlib import Path

CHUNK_BYTES = 1 << 20
_REASONS = {
    errno.ENOENT: "does not exist",
    errno.EISDIR: "is a directory, not a regular file",
    errno.ENOTDIR: "has a part that is not a directory",
    errno.EACCES: "cannot be read: permission denied",
    errno.EPERM: "cannot be read: operation not permitted",
    errno.ELOOP: "is a loop of symbolic links",
    errno.ENAMETOOLONG: "is a name too long for the file system",
    errno.EIO: "cannot be read: the device returned an I/O error",
}
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class FileRefused(ValueError):
    """A named file that is not read; the message is the reason, `missing` says the file does not exist."""

    def __init__(self, reason: str, missing: bool = False) -> None:
        super().__init__(reason)
        self.missing = missing


def kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def os_reason(exc: OSError) -> str:
    """An OSError as words, without its errno number or the descriptor Python names for a directory."""
    reason = _REASONS.get(exc.errno or 0)
    return reason or f"cannot be read: {(exc.strerror or type(exc).__name__).lower()}"


@cache
def _kernel_devices() -> frozenset[int]:
    """The st_dev of /proc and /sys, whose files are the kernel's, not data on a disk."""
    found = set()
    for root in ("/proc", "/sys"):
        try:
            found.add(os.stat(root).st_dev)
        except OSError:
            continue
    return frozenset(found)


def regular_size(path: Path | str) -> int:
    """The size of `path` when it is a regular file on disk, for a file a library maps rather than reads (a
    safetensors reference); FileRefused otherwise."""
    fd = _open(path)
    try:
        return _regular(fd).st_size
    except OSError as exc:
        raise FileRefused(os_reason(exc)) from None
    finally:
        os.close(fd)


def _open(path: Path | str) -> int:
    try:
        return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise FileRefused(os_reason(exc), missing=exc.errno == errno.ENOENT) from None
    except ValueError:  # a NUL in the name
        raise FileRefused("is not a valid path (it holds a NUL character)") from None


def _regular(fd: int) -> os.stat_result:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise FileRefused(f"is {kind_of(info.st_mode)}, not a regular file")
    if info.st_dev in _kernel_devices():
        raise FileRefused("is a file of the kernel (/proc or /sys), not a regular file on disk")
    return info


def read_bounded(path: Path | str, cap: int, too_large: str = "") -> bytes:
    """The bytes of the regular file `path`, at most `cap` of them; FileRefused otherwise (`too_large` words the cap
    in the message of a file past it: `holds more than {too_large}`)."""
    fd = _open(path)
    try:
        _regular(fd)
        return _read_capped(fd, cap, too_large)
    except OSError as exc:
        raise FileRefused(os_reason(exc)) from None
    finally:
        os.close(fd)


def _read_capped(fd: int, cap: int, too_large: str) -> bytes:
    chunks, total = [], 0
    while chunk := os.read(fd, min(CHUNK_BYTES, cap + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise FileRefused(f"holds more than {too_large or f'{cap:,} bytes, the most read for it'}")
    return b"".join(chunks)
