"""Typed reads from one JSON object of a config.json; each error is one line naming the file and the field."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bringup.errors import BringupError
from bringup.number_rule import NumberRefused, described, real_number, whole_number
from bringup.runner.sampling_params import is_integer

MAX_SIZE = 2**20  # hidden, intermediate, heads, head_dim, vocab: far above any published model, far below a bomb
MAX_LAYERS = 2**12
MAX_POSITIONS = 2**24
REQUIRED = object()


def json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


@dataclass
class Fields:
    """Typed reads from one JSON object; each error is one line naming the file and the field."""

    cfg: dict[str, Any]
    source: str

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def is_null(self, key: str) -> bool:
        """config.json sets `key` to null explicitly (which turns a feature off, unlike an absent key)."""
        return key in self.cfg and self.cfg[key] is None

    def get(self, key: str, default: Any) -> Any:
        if self.has(key):
            return self.cfg[key]
        if default is REQUIRED:
            raise BringupError(f"{self.source}: required key {key!r} is missing; is this a Llama-family config.json?")
        return default

    def wrong(self, key: str, what: str) -> BringupError:
        got = described(self.cfg[key])
        return BringupError(f"{self.source}: {key} must be {what}, got {got} (a JSON {json_type(self.cfg[key])}); "
                            "fix the file or re-download the model")

    def size(self, key: str, default: Any = REQUIRED, limit: int = MAX_SIZE) -> Any:
        """A positive integer no larger than `limit` (null or absent: `default`)."""
        if not self.has(key):
            return self.get(key, default)
        try:
            return whole_number(self.cfg[key], key, limit, low=1, strings=False)
        except NumberRefused:
            raise self.wrong(key, f"a positive integer (at most {limit})") from None

    def positive_number(self, key: str, default: Any = REQUIRED) -> float:
        if not self.has(key):
            return self.get(key, default)
        try:
            value = real_number(self.cfg[key], key, low=0.0, strings=False)
        except NumberRefused:
            raise self.wrong(key, "a positive finite number") from None
        if value == 0:
            raise self.wrong(key, "a positive finite number")
        return value

    def count(self, key: str, default: int) -> int:
        """A non-negative integer (null or absent: `default`)."""
        try:
            return whole_number(self.get(key, default), key, MAX_POSITIONS, strings=False)
        except NumberRefused:
            raise self.wrong(key, f"a non-negative integer (at most {MAX_POSITIONS})") from None

    def optional_number(self, key: str, default: float | None) -> float | None:
        """A positive finite number; absent: `default`; an explicit null: None (the feature is off)."""
        if key in self.cfg and self.cfg[key] is None:
            return None
        return self.positive_number(key, default) if default is not None or self.has(key) else None

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.wrong(key, "true or false")
        return value

    def text(self, key: str, default: str | None) -> Any:
        value = self.get(key, default)
        if value is not default and not isinstance(value, str):
            raise self.wrong(key, "a string")
        return value

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.get(key, {})
        if not isinstance(value, dict):
            raise self.wrong(key, "a JSON object")
        return dict(value)

    def token_id(self, key: str) -> int | None:
        value = self.get(key, None)
        if value is not None and not (is_integer(value) and value >= 0):
            raise self.wrong(key, "a non-negative integer token id")
        return value

    def token_ids(self, key: str) -> list[int]:
        """A token id or a list of them (absent or null: none)."""
        value = self.get(key, [])
        ids = value if isinstance(value, list) else [value]
        if not all(is_integer(i) and i >= 0 for i in ids):
            raise self.wrong(key, "a non-negative integer token id or a list of them")
        return ids


def sliding_layers(fields: Fields, layers: int, window: int | None, rule: Callable[[int], bool]) -> list[bool]:
    """Which layers slide: config.json's layer_types when given, else the family's rule; none without a window."""
    return [] if window is None else sliding_kind_layers(fields, layers, rule)


def sliding_kind_layers(fields: Fields, layers: int, rule: Callable[[int], bool]) -> list[bool]:
    """Which layers are of the sliding kind, window or not: config.json's layer_types, else the family's rule."""
    if not fields.has("layer_types"):
        return [rule(i) for i in range(layers)]
    types = fields.get("layer_types", None)
    kinds = ("full_attention", "sliding_attention")
    if not isinstance(types, list) or len(types) != layers or not all(isinstance(t, str) and t in kinds
                                                                     for t in types):
        raise fields.wrong("layer_types", f"a list of {layers} entries, each 'full_attention' or 'sliding_attention'")
    return [t == "sliding_attention" for t in types]
