"""Reads through a memory-mapped GGUF header, each read checked against the bytes left before it is made: a length
or count claiming more than the file holds is one line naming what claimed it, never an allocation."""

from __future__ import annotations

import mmap
import struct
from pathlib import Path

from bringup.errors import BringupError

U32, U64 = struct.Struct("<I"), struct.Struct("<Q")


def damaged(path: Path, size: int, why: str) -> BringupError:
    """The one line a GGUF file whose structure is broken ends in."""
    return BringupError(f"{path} is not a readable GGUF file ({why}); the download is truncated or corrupt: "
                        f"re-download it ({size} bytes here)")


class Cursor:
    """A position in the mapped file; every read names what it reads, for the message when the file ends first."""

    def __init__(self, buffer: mmap.mmap, path: Path) -> None:
        self.buffer, self.path, self.size, self.pos = buffer, path, len(buffer), 0

    def left(self) -> int:
        return self.size - self.pos

    def skip(self, count: int, what: str) -> int:
        """Moves past `count` bytes of `what`; the position they start at."""
        if count > self.left():
            raise self.error(f"{what} claims {count} bytes at byte {self.pos}, but only {self.left()} are left")
        start = self.pos
        self.pos += count
        return start

    def u32(self, what: str) -> int:
        return U32.unpack_from(self.buffer, self.skip(4, what))[0]

    def u64(self, what: str) -> int:
        return U64.unpack_from(self.buffer, self.skip(8, what))[0]

    def unpack(self, layout: struct.Struct, what: str) -> tuple:
        return layout.unpack_from(self.buffer, self.skip(layout.size, what))

    def text(self, what: str, limit: int) -> str:
        """A GGUF string (u64 length, UTF-8 bytes) of at most `limit` bytes."""
        length = self.u64(f"the length of {what}")
        if length > limit:
            raise self.error(f"{what} claims {length} bytes, more than the {limit} such a string may have")
        start = self.skip(length, what)
        return self.decoded(start, length, what)

    def decoded(self, start: int, length: int, what: str) -> str:
        try:
            return self.buffer[start:start + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"{what} is not UTF-8 (byte {start + exc.start})") from None

    def error(self, why: str) -> BringupError:
        return damaged(self.path, self.size, why)
