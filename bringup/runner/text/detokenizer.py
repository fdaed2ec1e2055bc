"""Incremental detokenisation: each new token yields the text it settles, without re-decoding the output.

`add(token)` returns the text that no later token can change; `flush()` returns the rest when the output
ends. Joined, the pieces equal the full decode of the output (special tokens skipped).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable
from typing import Protocol

REPLACEMENT = "\ufffd"


class Detokenizer(Protocol):
    def add(self, token_id: int) -> str: ...

    def flush(self) -> str: ...


class ByteDetokenizer:
    """Byte tokens (id = byte + offset) through an incremental UTF-8 decoder.

    A byte that can never start or continue a valid character becomes U+FFFD at once; an incomplete
    character waits for its next byte. A special token (below offset) decodes to nothing and ends the
    byte run, as the full decode does.
    """

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token_id: int) -> str:
        if token_id < self.offset:
            return self.flush()
        return self._utf8.decode(bytes([token_id - self.offset]))

    def flush(self) -> str:
        text = self._utf8.decode(b"", final=True)
        self._utf8.reset()
        return text


class WindowDetokenizer:
    """Any `decode(ids)`: decode a short window of trailing tokens and emit its new suffix once decided.

    The window starts one settled chunk back (prefix) so context-dependent decoding (a word's leading
    space) matches the full decode. Text ending in U+FFFD may be an incomplete character: it waits for
    the next token, but at most MAX_WAIT tokens (the longest UTF-8 character) before it counts as decided.
    Special tokens (`skipped`) decode to nothing and are left out, as the full decode leaves them out.
    """

    MAX_WAIT = 4

    def __init__(self, decode: Callable[[list[int]], str], skipped: frozenset[int] = frozenset()) -> None:
        self._decode = decode
        self._skipped = skipped
        self._ids: list[int] = []
        self._prefix = 0  # window start: the last emitted chunk, kept as context
        self._read = 0  # tokens before this are emitted

    def add(self, token_id: int) -> str:
        if token_id in self._skipped:
            return ""
        self._ids.append(token_id)
        return self._advance(final=False)

    def flush(self) -> str:
        return self._advance(final=True)

    def _advance(self, final: bool) -> str:
        if self._read == len(self._ids):
            return ""
        emitted = self._decode(self._ids[self._prefix:self._read])
        text = self._decode(self._ids[self._prefix:])
        waiting = len(self._ids) - self._read
        undecided = text.endswith(REPLACEMENT) and waiting < self.MAX_WAIT
        if not final and (len(text) <= len(emitted) or undecided):
            return ""  # nothing new yet (keep the window's context), or an incomplete character
        self._prefix, self._read = self._read, len(self._ids)
        return text[len(emitted):]
