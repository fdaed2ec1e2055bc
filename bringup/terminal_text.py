"""Text from a profile, a model or a request, made safe for a terminal: control characters shown, markup inert.

Every string that did not come from bringup itself goes through `shown` before it is printed as plain text, and
through `markup_safe` before it is placed inside a rich markup string.
"""

from __future__ import annotations

import re

MAX_SHOWN_CHARS = 2000  # of one string from outside: rich's highlighter takes seconds on 10^4 characters
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def bounded(text: str, limit: int | None = MAX_SHOWN_CHARS) -> str:
    """`text` cut to `limit` characters (None: whole), saying how long it was."""
    return text if limit is None or len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters in all)"


def shown(text: object, limit: int | None = MAX_SHOWN_CHARS) -> str:
    """`text`, at most `limit` characters of it (None: a whole document, written without rich), with every control
    character (ESC, BEL, CR, C1, bidi overrides) written as a visible escape."""
    return _CONTROL.sub(_visible, bounded(str(text), limit))


def quoted(name: object, limit: int = 60) -> str:
    """A name from a file, `shown` and cut to `limit` characters, in quotes: safe and short enough for an error
    line."""
    text = shown(name)
    return repr(text if len(text) <= limit else text[:limit - 3] + "...")


def markup_safe(text: object) -> str:
    """`shown(text)` with rich markup escaped, for interpolation into a rich markup string."""
    from rich.markup import escape

    return escape(shown(text))
