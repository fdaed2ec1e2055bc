"""The one tolerance table: per dtype, with the reason for each row, and the accumulation scaling."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class ToleranceRow:
    dtype: str
    rtol: float
    atol: float
    compiled_tol: float  # `tol` in the eager-vs-compiled rule compiled_err <= k * eager_err + tol / 10
    reason: str


TABLE: dict[str, ToleranceRow] = {
    row.dtype: row
    for row in (
        ToleranceRow("float64", 1e-7, 1e-7, 1e-7,
                     "torch.testing default for float64; the reference itself is float64"),
        ToleranceRow("float32", 1.3e-6, 1e-5, 1e-4,
                     "torch.testing default for float32 (about 11 ulps at 2^-23); compiled tol = "
                     "torch._dynamo.utils.same() default 1e-4"),
        ToleranceRow("float16", 1e-3, 1e-5, 1e-3,
                     "torch.testing default for float16 (about 1 ulp at 2^-10 plus rounding of the output)"),
        ToleranceRow("bfloat16", 1.6e-2, 1e-5, 1e-2,
                     "torch.testing default for bfloat16 (about 2 ulps at 2^-8: output rounding)"),
        ToleranceRow("float8_e4m3fn", 1.25e-1, 1e-2, 1e-1,
                     "3 mantissa bits: 1 ulp at 2^-3 is the floor; atol covers subnormal outputs"),
        ToleranceRow("float8_e5m2", 2.5e-1, 1e-2, 2e-1,
                     "2 mantissa bits: 1 ulp at 2^-2 is the floor; atol covers subnormal outputs"),
    )
}

ACCUM_FREE_LENGTH = 256
ACCUM_REASON = (
    "rounding errors of a K-term accumulation grow like a random walk, so rtol and atol are scaled by "
    f"sqrt(K / {ACCUM_FREE_LENGTH}) (never below 1: K <= {ACCUM_FREE_LENGTH} uses the floor), and an "
    "absolute term rtol * rms(reference) covers outputs that cancel to near zero"
)
EXACT_REASON = "integer, index, selection and data-movement results are exact: values are copied, not computed"


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    reason: str


STEP_ROUNDING_REASON = (
    "each of the K partial results is stored in the dtype (read-modify-write), so K roundings add up: "
    "rtol and atol are scaled by sqrt(K)"
)


def accumulation_factor(accum: int, step_rounding: bool = False) -> float:
    if accum <= 1:
        return 1.0
    if step_rounding:
        return math.sqrt(accum)
    return max(1.0, math.sqrt(accum / ACCUM_FREE_LENGTH))


def exact() -> Tolerance:
    return Tolerance(0.0, 0.0, EXACT_REASON)


def row_for(dtype: str) -> ToleranceRow:
    if dtype in TABLE:
        return TABLE[dtype]
    return ToleranceRow(dtype, 0.0, 0.0, 0.0, EXACT_REASON)


def tolerance_for(dtype: str, accum: int, reference_rms: float, step_rounding: bool = False) -> Tolerance:
    """Tolerance for a computed (non-exact) result of `dtype` accumulated over `accum` terms."""
    row = row_for(dtype)
    if row.rtol == 0.0:
        return exact()
    factor = accumulation_factor(accum, step_rounding)
    rtol = row.rtol * factor
    atol = row.atol * factor
    if accum > 1:
        atol += rtol * reference_rms
        why = STEP_ROUNDING_REASON if step_rounding else ACCUM_REASON
        return Tolerance(rtol, atol, f"{row.reason}; K={accum}: {why}")
    return Tolerance(rtol, atol, row.reason)
