"""Unit roundoff and Higham's accumulated-rounding factor, per floating dtype."""

from __future__ import annotations

import math

import torch

# u = 2^-p for a p-bit significand (round to nearest): Higham, Accuracy and Stability of Numerical Algorithms,
# 2nd ed., section 2.1
UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8,
                 "float8_e4m3fn": 2.0**-4, "float8_e5m2": 2.0**-3}

# the arithmetic of the half dtypes runs in float32 on every backend torch has (opmath)
OPMATH_ROUNDOFF = 2.0**-24


def unit_roundoff(dtype: torch.dtype) -> float:
    return UNIT_ROUNDOFF.get(str(dtype).removeprefix("torch."), 2.0**-24)


def subnormal_spacing(dtype: torch.dtype) -> float:
    """The gap between the dtype's subnormal numbers: the absolute error an underflow can add."""
    return torch.finfo(dtype).tiny * 2.0 * unit_roundoff(dtype)


def growth(n: float, u: float) -> float:
    """(1+u)^n - 1, the bound on n relative roundings (Higham, Lemma 3.1); equals gamma_n = nu/(1-nu) to first
    order and stays finite where n*u >= 1 makes gamma_n undefined."""
    return math.expm1(max(n, 0.0) * math.log1p(u))
