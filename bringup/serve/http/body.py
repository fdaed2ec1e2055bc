"""Request bodies checked as their bytes arrive, whatever the transfer encoding.

A body over the byte limit is refused when the limit is passed, not after it was read in full. A body
holding more JSON values than any valid request can (millions of token ids) is refused the same way, before
it is parsed: parsing JSON holds the interpreter lock, so a 48 MB list would stall every other request for
half a second even in a worker thread.

The value count is the number of commas outside strings (list items and object fields), found with
C-speed byte operations per chunk: escaped backslashes and escaped quotes are masked first, so every quote
left opens or closes a string, and the strings' count is capped too (it bounds the per-chunk work).

The nesting depth (brackets and braces outside strings) is followed the same way, so a body nested deeper than
any valid request is refused before the recursive JSON parser (or anything after it) sees it.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.json_depth import bracket_depths

MIB = 1024 * 1024
MAX_JSON_DEPTH = 64  # a valid request nests 4 levels (messages, content parts); template arguments get the rest


@dataclass(frozen=True)
class BodyLimits:
    max_bytes: int
    max_values: int  # commas outside strings
    max_strings: int
    values_rule: str = ""  # why no valid request holds more values (for the message)
    max_depth: int = MAX_JSON_DEPTH


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str
    code: str


def over_declared_size(declared: int, limits: BodyLimits) -> Refusal:
    return Refusal(413, f"request body of {declared} bytes is over the limit of {_size(limits.max_bytes)}; "
                        "send a smaller request (the server's --max-body-mb)", "body_too_large")


class BodyScanner:
    """Counts one body's bytes, values and strings chunk by chunk; feed() says when a limit is passed."""

    def __init__(self, limits: BodyLimits) -> None:
        self.limits = limits
        self.size = 0
        self.values = 0
        self.quotes = 0
        self.depth = 0
        self.deepest = 0
        self._in_string = False
        self._carry = b""  # an unpaired backslash that ended the previous chunk

    def feed(self, chunk: bytes) -> Refusal | None:
        self.size += len(chunk)
        if self.size > self.limits.max_bytes:
            return Refusal(413, f"request body is over the limit of {_size(self.limits.max_bytes)}; stopped "
                                f"reading it at {self.size} bytes; send a smaller request (the server's "
                                "--max-body-mb)", "body_too_large")
        if b"\x00" in chunk:
            return Refusal(400, "request body holds a NUL byte: JSON requests must be UTF-8 (RFC 8259), which "
                                "never has one; send UTF-8 JSON", "invalid_encoding")
        self._count(self._masked(chunk))
        if self.deepest > self.limits.max_depth:
            return Refusal(400, f"request body nests JSON deeper than {self.limits.max_depth} levels (the "
                                "server's maximum recursion depth for JSON, checked before parsing); no valid "
                                "request nests that deep; flatten it", "json_too_deep")
        if self.quotes > 2 * self.limits.max_strings:
            return Refusal(413, f"request body holds more than {self.limits.max_strings} JSON strings; no valid "
                                "request has that many; shorten it", "body_too_large")
        if self.values > self.limits.max_values:
            return Refusal(413, f"request body holds more than {self.limits.max_values} JSON values (list items "
                                f"and fields){self.limits.values_rule}; shorten it", "body_too_large")
        return None

    def _masked(self, chunk: bytes) -> bytes:
        """The chunk with escaped backslashes and escaped quotes replaced, so each quote left is a real one."""
        text = (self._carry + chunk).replace(b"\\\\", b"__")
        self._carry = b"\\" if text.endswith(b"\\") else b""
        if self._carry:
            text = text[:-1]
        return text.replace(b'\\"', b"__")

    def _count(self, text: bytes) -> None:
        quotes = text.count(b'"')
        self.quotes += quotes
        if self.quotes > 2 * self.limits.max_strings:
            return  # refused by the caller; don't split a chunk of countless strings
        if not quotes:
            if not self._in_string:
                self.values += text.count(b",")
                self._follow_depth(text)
            return
        parts = text.split(b'"')
        outside = parts[1::2] if self._in_string else parts[0::2]
        self.values += sum(part.count(b",") for part in outside)
        self._follow_depth(b"".join(outside))
        self._in_string ^= quotes % 2 == 1

    def _follow_depth(self, outside_strings: bytes) -> None:
        deepest, self.depth = bracket_depths(outside_strings, self.depth)
        self.deepest = max(self.deepest, deepest)


def _size(n: int) -> str:
    return f"{n / MIB:g} MiB ({n} bytes)" if n >= MIB else f"{n} bytes"
