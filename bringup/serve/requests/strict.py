"""Strict JSON for request bodies: no coercion, no NaN, and integers that JSON writes as 3.0."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field


class StrictModel(BaseModel):
    """No type coercion ("1" is not a number, 1 is not a bool), no NaN or Infinity (which Python's JSON parser
    accepts and the JSON standard does not). Unknown fields are kept aside in `model_extra`, unvalidated, for
    the server to log and ignore."""

    model_config = ConfigDict(extra="allow", strict=True, allow_inf_nan=False)


def _integral_float_to_int(value: Any) -> Any:
    """JSON does not tell 3 from 3.0 (JSON Schema calls both "integer"); a string stays an error."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def Int(ge: int, le: int) -> Any:
    """A JSON integer in [ge, le]: 3.0 counts as 3, "3" and true are errors (constraints stay in the schema)."""
    return Annotated[Annotated[int, Field(ge=ge, le=le)], BeforeValidator(_integral_float_to_int)]
