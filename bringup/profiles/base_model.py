"""The base for every profile model: unknown keys are errors, so typos in a profile are caught, and every number
field (and every number key or value of a dict or list field) is read by the one number rule
(bringup/number_rule.py): ASCII digits or a finite float, no bools, whole numbers from 0 to 2^63 - 1."""

from __future__ import annotations

import math
import types
from functools import cache
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator

from bringup.number_rule import INT64_MAX, described, real_number, whole_number


def _optional(annotation: Any) -> Any:
    """`X` for `X | None`; the annotation itself otherwise."""
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    return annotation


def number_rule(value: Any, annotation: Any, where: str) -> Any:
    """`value` with each number the annotation expects read by the rule; anything else is left to pydantic."""
    annotation = _optional(annotation)
    if value is None or annotation is None:
        return value
    if annotation is int:
        return whole_number(value, where)
    if annotation is float:
        return real_number(value, where)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return {number_rule(k, args[0], f"{where} key"): number_rule(v, args[1], f"{where}[{described(k)}]")
                for k, v in value.items()}
    if origin in (list, tuple) and isinstance(value, list) and len(args) == 1:
        return [number_rule(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _needs_rule(value: Any) -> bool:
    """False for the plain numbers a profile is made of (checked without a call), True for anything to check."""
    kind = type(value)
    if kind is int:
        return not 0 <= value <= INT64_MAX
    if kind is float:
        return not math.isfinite(value)
    return value is not None


class ProfileModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @classmethod
    @cache
    def _number_fields(cls) -> tuple[tuple[str, Any, bool], ...]:
        """(key, annotation, a plain number?) of each field the number rule reads: a number, or a dict or list that
        holds them."""
        found = []
        for name, field in cls.model_fields.items():
            annotation = _optional(field.annotation)
            holds = get_origin(annotation) in (dict, list, tuple) and any(
                _optional(a) in (int, float) for a in get_args(annotation))
            if annotation in (int, float) or holds:
                found.append((field.alias or name, field.annotation, annotation in (int, float)))
        return tuple(found)

    @model_validator(mode="before")
    @classmethod
    def _number_rule(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        changed = None
        for key, annotation, scalar in cls._number_fields():
            value = data.get(key)
            if scalar and not _needs_rule(value):
                continue
            checked = number_rule(value, annotation, key)
            if checked is not value:
                changed = changed if changed is not None else dict(data)
                changed[key] = checked
        return data if changed is None else changed
