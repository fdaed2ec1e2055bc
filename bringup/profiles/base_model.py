"""The base for every profile model: unknown keys are errors, so typos in a profile are caught, and in a profile read
from a file every number field (and every number key or value of a dict or list field) is read by the one number
rule (bringup/number_rule.py): ASCII digits or a finite float, no bools, whole numbers from 0 to 2^63 - 1."""

from __future__ import annotations

import math
import types
from functools import cache
from typing import Any, ClassVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationInfo, model_validator

from bringup.number_rule import INT64_MAX, described, real_number, whole_number

FROM_FILE = "from_file"
# the validation context of a profile read from a file (store.py): the number rule applies to what was read, not to
# records a stage builds (those check their own figures, e.g. eval refuses a non-finite one in one line)
READ_FROM_FILE = {FROM_FILE: True}


def _optional(annotation: Any) -> Any:
    """`X` for `X | None`; the annotation itself otherwise."""
    if get_origin(annotation) in (Union, types.UnionType):
        kinds = [a for a in get_args(annotation) if a is not type(None)]
        return kinds[0] if len(kinds) == 1 else None
    return annotation


def number_rule(value: Any, annotation: Any, where: str, floats_later: bool = False) -> Any:
    """`value` with each number the annotation expects read by the rule; anything else is left to pydantic (and a
    float, with `floats_later`, to the record's own check)."""
    annotation = _optional(annotation)
    if value is None or annotation is None:
        return value
    if annotation is int:
        return whole_number(value, where)
    if annotation is float:
        return value if floats_later and type(value) is float else real_number(value, where)
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return {number_rule(k, args[0], f"{where} key", floats_later):
                number_rule(v, args[1], f"{where}[{described(k)}]", floats_later) for k, v in value.items()}
    if origin in (list, tuple) and isinstance(value, list) and len(args) == 1:
        return [number_rule(v, args[0], f"{where}[{i}]", floats_later) for i, v in enumerate(value)]
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
    # a record whose floats a later check reads (a tune record: runner/plan/record/bounds.py refuses a non-finite or
    # negative time there, as a fallback, not as a profile that cannot be read): its floats pass here
    floats_checked_later: ClassVar[bool] = False

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
    def _number_rule(cls, data: Any, info: ValidationInfo) -> Any:
        if not isinstance(data, dict) or not (info.context or {}).get(FROM_FILE):
            return data
        changed = None
        for key, annotation, scalar in cls._number_fields():
            value = data.get(key)
            if scalar and not _needs_rule(value):
                continue
            checked = number_rule(value, annotation, key, cls.floats_checked_later)
            if checked is not value:
                changed = changed if changed is not None else dict(data)
                changed[key] = checked
        return data if changed is None else changed
