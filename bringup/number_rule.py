"""The one rule for a number that comes from a file, a spec, a header or a request.

A whole number is an int, or a string of ASCII digits (`"²"` and `"١٠٢٤"` are not digits here, though Python's
`isdigit` and `int` take them); a real number is an int or a float that is finite, or such a number written in ASCII.
A bool is neither. Each is bounded by what the thing can be, and its length is checked before it is converted, so a
5,000-digit string is never handed to `int`. A number that breaks the rule raises NumberRefused, whose message is one
line naming the field and the bound; the caller adds what to do.

No torch, no pydantic: the emulator's spec parser and the export read through it as the profile schema does.
"""

from __future__ import annotations

import math
import re
from typing import Any

INT64_MAX = (1 << 63) - 1  # what a size or a count in a file can be at most: C's int64_t
FLOAT_TEXT_CHARS = 64
_DIGITS = re.compile(r"[0-9]+", re.ASCII)
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)


class NumberRefused(ValueError):
    """A number from outside that breaks the rule; the message names the field and the bound."""


def described(value: Any) -> str:
    """The value as an error line shows it: short, and never by converting a huge int to text."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a number of about {int(value.bit_length() * math.log10(2)) + 1:,} digits"
    text = repr(value)
    if isinstance(value, str) and len(value) > 40:
        return f"a {len(value):,}-character string"
    return text if len(text) <= 40 else text[:37] + "..."


def whole_number(value: Any, field: str, high: int = INT64_MAX, low: int = 0, strings: bool = True) -> int:
    """`value` as an int within [low, high]; NumberRefused otherwise. `strings` False: a typed format (JSON), where
    a number written as a string is refused."""
    if isinstance(value, str) and strings:
        text = value.strip()
        if not _DIGITS.fullmatch(text):
            raise NumberRefused(f"{field}: {described(value)} is not a whole number written in ASCII digits")
        if len(text.lstrip("0")) > len(str(high)):
            raise NumberRefused(f"{field}: {described(value)} is more than {high:,}, the most it can be")
        value = int(text)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise NumberRefused(f"{field}: {described(value)} is not a whole number")
    return _within(value, field, described(value), high, low, ",")


def real_number(value: Any, field: str, high: float = math.inf, low: float = -math.inf,
                strings: bool = True) -> float:
    """`value` as a finite float within [low, high]; NumberRefused otherwise (`strings` as for whole_number)."""
    said = described(value)
    if isinstance(value, str) and strings:
        text = value.strip()
        if len(text) > FLOAT_TEXT_CHARS or not _FLOAT.fullmatch(text):
            raise NumberRefused(f"{field}: {said} is not a number written in ASCII")
        value = float(text)
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise NumberRefused(f"{field}: {said} is not a number")
    if isinstance(value, int) and value.bit_length() > 1023:
        raise NumberRefused(f"{field}: {said} is larger than any float")
    number = float(value)
    if not math.isfinite(number):
        raise NumberRefused(f"{field}: {said} is not a finite number")
    return _within(number, field, said, high, low, "g")


def _within(number: Any, field: str, said: str, high: Any, low: Any, style: str) -> Any:
    """`number` when low <= number <= high; else NumberRefused naming the bound it broke (written in `style`)."""
    if number > high:
        raise NumberRefused(f"{field}: {said} is more than {high:{style}}, the most it can be")
    if number < low:
        raise NumberRefused(f"{field}: {said} is less than {low:{style}}, the least it can be")
    return number
