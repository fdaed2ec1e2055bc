"""How deep JSON nests, found on its bytes before any parser recurses: the model loader's files and request bodies.

Brackets inside strings do not count. `bracket_depths` follows bytes that hold no string (a streaming reader
strips them chunk by chunk); `json_depth` strips the strings of a whole text first.
"""

from __future__ import annotations

import re
from itertools import accumulate

_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
for _open, _close in (b"[]", b"{}"):
    _STEP[_open], _STEP[_close] = 1, -1
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)


def bracket_depths(outside_strings: bytes, start: int = 0) -> tuple[int, int]:
    """(the deepest level reached, the level at the end) of bytes holding no JSON string, opened at level `start`."""
    brackets = outside_strings.translate(None, _NOT_BRACKETS)
    if not brackets:
        return start, start
    depths = list(accumulate(map(_STEP.__getitem__, brackets), initial=start))
    return max(depths), depths[-1]


def json_depth(raw: bytes) -> int:
    """How deep the arrays and objects of the JSON text `raw` nest."""
    return bracket_depths(_JSON_STRING.sub(b"", raw))[0]
