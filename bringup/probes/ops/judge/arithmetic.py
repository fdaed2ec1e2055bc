"""Which arithmetic an op does, by its verify-ops name: the rule its error bound is derived from.

The catalog's cases name their op and keep their inputs; everything else the bound needs (the number of terms of
a sum, the inner length of a product) is measured from the float64 reference arguments, never written per case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Rule = Literal["sum", "mean", "softmax", "log_softmax", "layer_norm", "rms_norm", "addition", "pointwise",
               "cancelling", "tolerance"]

# sums of products with non-negative coefficients: the op applied to |inputs| gives sum |x_i| (|A||B| for a
# product), and applied to ones gives the number of terms
SUMS = ("sum", "cumsum", "matmul", "linear", "bmm", "addmm", "baddbmm")
POINTWISE = ("silu", "sigmoid", "tanh", "exp", "log", "rsqrt", "sqrt", "reciprocal", "pow", "mul", "div")

RULES = {
    **{name: "sum" for name in SUMS},
    **{name: "pointwise" for name in POINTWISE},
    "mean": "mean",
    "softmax": "softmax",
    "log_softmax": "log_softmax",
    "layer_norm": "layer_norm",
    "rms_norm": "rms_norm",
    "F.rms_norm": "rms_norm",
    "add": "addition",
    "sub": "addition",
    "gelu": "cancelling",  # x * (1 + erf(x / sqrt 2)) / 2 cancels for x << 0: an absolute error of u*|x|
}

# results whose outputs along `dim` share one computed statistic (a sum, a mean square): they are judged for bias
# row by row, and cumsum's outputs are judged by their increments (a scan carries each rounding forward)
ROW_SHARED = frozenset({"softmax", "log_softmax", "layer_norm", "rms_norm", "tolerance"})


@dataclass(frozen=True)
class Arithmetic:
    """What the judge knows of one case: the op, its float64 reference function and arguments, its dim."""

    op: str
    reference_fn: Callable[..., Any]
    ref_args: list[Any]
    dim: int | None = None

    @property
    def rule(self) -> str:
        return RULES.get(self.op, "tolerance")

    @property
    def scan(self) -> bool:
        return self.op == "cumsum"

    @property
    def row_shared(self) -> bool:
        return self.rule in ROW_SHARED


def dim_of(params: tuple[tuple[str, Any], ...]) -> int | None:
    """The case's `dim` parameter when it has a single one."""
    value = dict(params).get("dim")
    return value if isinstance(value, int) else None
