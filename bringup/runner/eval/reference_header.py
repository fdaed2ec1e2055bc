"""The JSON header of an eval reference file: what the file was made from, read with every field's type and range
checked where the file is read (the file may come from another machine), each refusal naming the field."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields
from typing import Any

from bringup.json_depth import json_depth
from bringup.terminal_text import shown

SCHEMA = "bringup.eval-reference/v1"
MAX_HEADER_DEPTH = 4  # the header is an object holding one object (versions)
MAX_DIGITS = 20  # an integer field longer than this is refused by name, never converted
MAX_CTX = 2**24
MAX_TOKENS = 2**31
MAX_VOCAB = 2**20
MAX_TEXT_CHARS = 256  # model, dtype, device, each version
MAX_VERSIONS = 16
SHA256 = re.compile(r"[0-9a-f]{64}")


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


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class HeaderRefused(ValueError):
    """What is wrong with the header, naming the field, as a phrase."""


class LongInteger:
    """An integer of the header too long to be one bringup writes, kept as its digit count."""

    def __init__(self, digits: str) -> None:
        self.digits = len(digits.lstrip("-"))

    def __repr__(self) -> str:
        return f"an integer of {self.digits} digits"


def parse_header(text: str) -> Any:
    """The header's JSON; HeaderRefused when it nests deeper than MAX_HEADER_DEPTH (counted before the parser
    recurses) or is not JSON. Integers longer than MAX_DIGITS stay LongInteger, for the field checks to name."""
    depth = json_depth(text.encode())
    if depth > MAX_HEADER_DEPTH:
        raise HeaderRefused(f"its header nests {depth} levels deep, more than the {MAX_HEADER_DEPTH} it has")
    try:
        return json.loads(text, parse_int=lambda digits: int(digits) if len(digits) <= MAX_DIGITS
                          else LongInteger(digits))
    except ValueError as exc:
        raise HeaderRefused(f"its header is not JSON ({shown(exc)[:80]})") from None


def header_from_json(values: Any) -> ReferenceHeader:
    """The header of a parsed JSON object whose schema is SCHEMA; HeaderRefused naming the first bad field."""
    names = [f.name for f in fields(ReferenceHeader)]
    missing = [name for name in names if name not in values]
    unknown = [str(name) for name in values if name not in names]
    if missing or unknown:
        raise HeaderRefused(f"its header lacks {', '.join(missing)}" if missing else
                            f"its header has fields this bringup does not know: {_value(', '.join(unknown))}")
    vocab = _integer(values, "vocab_size", 1, MAX_VOCAB)
    ctx = _integer(values, "ctx", 2, MAX_CTX)
    return ReferenceHeader(
        schema=values["schema"], k=_integer(values, "k", 1, vocab, "vocab_size"), ctx=ctx,
        stride=_integer(values, "stride", 1, ctx - 1, "ctx - 1"),
        text_sha256=_sha256(values, "text_sha256"), tokens_sha256=_sha256(values, "tokens_sha256"),
        tokens=_integer(values, "tokens", 2, MAX_TOKENS), tokenizer_sha256=_sha256(values, "tokenizer_sha256"),
        vocab_size=vocab, model=_text(values, "model"), dtype=_text(values, "dtype"), device=_text(values, "device"),
        versions=_versions(values))


def _integer(values: dict[str, Any], name: str, low: int, high: int, high_name: str | None = None) -> int:
    value = values[name]
    if not is_integer(value) or not low <= value <= high:
        bound = f"{high_name} ({high})" if high_name else str(high)
        raise HeaderRefused(f"its header's {name} is {_value(value)}, not an integer from {low} to {bound}")
    return value


def _sha256(values: dict[str, Any], name: str) -> str:
    value = values[name]
    if not isinstance(value, str) or not SHA256.fullmatch(value):
        raise HeaderRefused(f"its header's {name} is {_value(value)}, not a sha256 (64 lowercase hex digits)")
    return value


def _text(values: dict[str, Any], name: str) -> str:
    value = values[name]
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TEXT_CHARS:
        raise HeaderRefused(f"its header's {name} is {_value(value)}, not a string of 1 to {MAX_TEXT_CHARS} "
                            "characters")
    return value


def _versions(values: dict[str, Any]) -> dict[str, str]:
    versions = values["versions"]
    ok = (isinstance(versions, dict) and len(versions) <= MAX_VERSIONS
          and all(isinstance(v, str) and len(v) <= MAX_TEXT_CHARS and len(k) <= MAX_TEXT_CHARS
                  for k, v in versions.items()))
    if not ok:
        raise HeaderRefused(f"its header's versions is {_value(versions)}, not an object of at most {MAX_VERSIONS} "
                            f"names and version strings")
    return dict(versions)


def _value(value: Any) -> str:
    """A value for a message: repr'd, control characters escaped, at most 40 characters."""
    text = shown(repr(value))
    return text if len(text) <= 40 else text[:37] + "..."
