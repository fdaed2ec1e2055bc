"""Range checks for option values, run once as the command line is parsed (typer callbacks).

Each refusal is one line naming the option, the rule and the value (exit code 2), before any work starts.
Sampling options are not here: they follow SamplingParams.validate_request, the rules the server applies.
"""

from __future__ import annotations

import math

import typer

from bringup.errors import BringupError


def _flag(param: typer.CallbackParam) -> str:
    return max(param.opts, key=len) if param.opts else f"--{param.name}"


def _refuse(param: typer.CallbackParam, value: object, rule: str) -> BringupError:
    shown = f"{value:g}" if isinstance(value, float) else value
    return BringupError(f"{_flag(param)} {shown}: must be {rule}")


def positive_seconds(param: typer.CallbackParam, value: float | None) -> float | None:
    """A time limit: finite and > 0 (NaN, inf, 0 and negatives would never or always expire)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise _refuse(param, value, f"a finite number of seconds greater than 0, e.g. {_flag(param)} 60")
    return value


def non_negative_seconds(param: typer.CallbackParam, value: float | None) -> float | None:
    """An interval where 0 means "every time": finite and >= 0."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise _refuse(param, value, "a finite number of seconds, 0 or more (0 = every time)")
    return value


def non_negative_number(param: typer.CallbackParam, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise _refuse(param, value, "a finite number, 0 or more")
    return value


def at_least_one(param: typer.CallbackParam, value: int | None) -> int | None:
    """A count: 1 or more."""
    if value is not None and value < 1:
        raise _refuse(param, value, "at least 1")
    return value


def at_least_zero(param: typer.CallbackParam, value: int | None) -> int | None:
    if value is not None and value < 0:
        raise _refuse(param, value, "0 or more")
    return value


def device_name(param: typer.CallbackParam, value: str | None) -> str | None:
    """--device: absent means "choose"; given, it must name a device (an empty string is not "absent")."""
    if value is not None and not value.strip():
        raise BringupError(f"{_flag(param)} {value!r} is empty; name a device such as cpu, cuda:0, xpu:0 or mps, "
                           "or leave the option out to choose automatically")
    return value


def name_list(value: list[str] | None) -> list[str] | None:
    """`--only a,b --only c` → [a, b, c]: the filter options of every stage take names repeated or comma-separated."""
    if value is None:
        return None
    return [name.strip() for item in value for name in item.split(",") if name.strip()]
