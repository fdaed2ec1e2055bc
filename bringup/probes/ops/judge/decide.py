"""Judge one floating output by the two tests: within the error bound of the op's arithmetic, and unbiased."""

from __future__ import annotations

import torch

from bringup.probes.ops.judge.arithmetic import Arithmetic
from bringup.probes.ops.judge.bias import Z_BIAS, bias_test
from bringup.probes.ops.judge.bounds import error_bound
from bringup.probes.ops.judge.metrics import Comparison, compare_tensor, finite_or_none
from bringup.probes.ops.judge.roundoff import unit_roundoff
from bringup.probes.ops.judge.tolerances import Tolerance


def _bias_dims(arith: Arithmetic | None, reference: torch.Tensor) -> tuple[int | None, int | None]:
    """(row dim, scan dim) of the bias test: rows sharing one statistic, or the scan's direction."""
    if arith is None or reference.dim() == 0:
        return None, None
    dim = -1 if arith.dim is None else arith.dim
    if arith.scan:
        return None, dim
    return (dim if arith.row_shared else None), None


def _add_bias(comp: Comparison, actual: torch.Tensor, reference: torch.Tensor, arith: Arithmetic | None) -> None:
    row_dim, scan_dim = _bias_dims(arith, reference)
    a = actual.detach().to("cpu", torch.float64)
    b = reference.detach().to("cpu", torch.float64)
    result = bias_test(a, b, unit_roundoff(actual.dtype), row_dim, scan_dim)
    if result is None:
        return
    comp.bias, comp.bias_z = finite_or_none(result.scale_error), finite_or_none(result.z)
    if not result.decides:
        return
    if comp.passed and result.biased:
        comp.passed, comp.decided_by = False, "bias"
        comp.problems.append(f"biased: least-squares scale of result vs reference is 1{result.scale_error:+.3g}, "
                             f"z = {result.z:.1f} > {Z_BIAS:g} over {result.clusters} independent outputs, beyond u = "
                             f"{result.floor:.3g}")
    elif comp.passed:
        comp.decided_by = f"{comp.decided_by} and bias"


def judge_tensor(actual: torch.Tensor, reference: torch.Tensor, tol: Tolerance,
                 arith: Arithmetic | None) -> Comparison:
    """compare_tensor with the op's error bound where the op has a rule and the bound is finite (else `tol`), then
    the bias test on a floating result that passed (with at least MIN_CLUSTERS independent outputs)."""
    exact = tol.rtol == 0.0 and tol.atol == 0.0
    floating = actual.is_floating_point() and reference.is_floating_point()
    bound = None
    if arith is not None and floating and not exact and tuple(actual.shape) == tuple(reference.shape):
        bound = error_bound(arith, reference.detach().to("cpu", torch.float64), actual.dtype)
        if bound is not None and not bool(torch.isfinite(bound).all()):
            bound = None  # n·u >= 1: the arithmetic bounds nothing here; the tolerance table decides (and the bias)
    comp = compare_tensor(actual, reference, tol, bound)
    if floating and not exact and comp.decided_by in ("bound", "tolerance"):
        _add_bias(comp, actual, reference, arith)
    return comp

