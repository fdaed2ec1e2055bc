"""Rope scaling as config.json gives it (`rope_scaling`, or transformers 5's `rope_parameters`), checked: the types
rope.py computes, each with its fields; any other type is refused in one line."""

from __future__ import annotations

from typing import Any

from bringup.errors import BringupError
from bringup.runner.model.config.fields import Fields

SCALED_TYPES = ("llama3", "linear")


def read_rope_scaling(scaling: dict[str, Any], source: str) -> dict[str, Any] | None:
    """The scaling rope.py applies ({"rope_type": ..., "factor": ..., ...}), or None for plain rope."""
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type in (None, "default"):
        return None
    if rope_type not in SCALED_TYPES:
        raise BringupError(f"{source}: rope scaling type {str(rope_type)[:40]!r} is not supported "
                           f"(only {' and '.join(repr(t) for t in SCALED_TYPES)})")
    where = Fields(scaling, f"{source}: rope scaling")
    factor = where.positive_number("factor")
    if rope_type == "linear":
        return {"rope_type": "linear", "factor": factor}
    low, high = where.positive_number("low_freq_factor", 1.0), where.positive_number("high_freq_factor", 4.0)
    where.positive_number("original_max_position_embeddings", 8192.0)
    if low == high:
        raise BringupError(f"{source}: rope scaling has high_freq_factor equal to low_freq_factor, which "
                           "divides by zero; fix the file")
    return {**scaling, "rope_type": "llama3"}
