"""Typed reads of a GGUF file's metadata: a missing key or a value of the wrong type is one line naming the key."""

from __future__ import annotations

from typing import Any

from bringup.errors import BringupError
from bringup.runner.sources.gguf.reader import GGUFFile

REQUIRED = object()  # the default that makes a key required


def integer(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, _is_integer, "an integer")


def number(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, _is_number, "a number")


def text(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, lambda v: isinstance(v, str), "a string")


def flag(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, lambda v: isinstance(v, bool), "true or false")


def texts(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                  "an array of strings")


def integers(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, lambda v: isinstance(v, list) and all(_is_integer(x) for x in v),
                  "an array of integers")


def numbers(file: GGUFFile, key: str, default: Any = REQUIRED) -> Any:
    return _typed(file, key, default, lambda v: isinstance(v, list) and set(map(type, v)) <= {int, float},
                  "an array of numbers")


def _typed(file: GGUFFile, key: str, default: Any, ok: Any, what: str) -> Any:
    if key not in file.metadata:
        if default is REQUIRED:
            raise BringupError(f"{file.path}: metadata key {key!r} is missing; the file is incomplete or was not "
                               "written for this architecture: re-convert it")
        return default
    value = file.metadata[key]
    if not ok(value):
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        raise BringupError(f"{file.path}: metadata key {key!r} must be {what}, got {shown}; the file is corrupt: "
                           "re-convert it")
    return value


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return _is_integer(value) or isinstance(value, float)
