"""Compare a device result with the float64 reference: max abs, max rel, NMSE, worst index, verdict."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from bringup.probes.ops.judge.tolerances import Tolerance


@dataclass
class Comparison:
    passed: bool
    max_abs: float | None = None
    max_rel: float | None = None
    nmse: float | None = None
    worst_index: list[int] | None = None
    worst_output: int | None = None  # position in a tuple result; None for a single tensor
    reference_rms: float | None = None
    problems: list[str] = field(default_factory=list)


def flatten_outputs(result: Any) -> list[torch.Tensor]:
    """A tensor, a (named) tuple/list of tensors, or a Python number -> list of tensors."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        out: list[torch.Tensor] = []
        for item in result:
            out.extend(flatten_outputs(item))
        return out
    if isinstance(result, (int, float, bool)):
        return [torch.tensor(result)]
    raise TypeError(f"cannot compare a result of type {type(result).__name__}")


def rms(t: torch.Tensor) -> float:
    t = t.detach().to("cpu", torch.float64)
    t = t[torch.isfinite(t)]
    if t.numel() == 0:
        return 0.0
    return float(t.pow(2).mean().sqrt())


def _unravel(flat_index: int, shape: torch.Size) -> list[int]:
    idx = []
    for size in reversed(shape):
        idx.append(flat_index % size)
        flat_index //= size
    return list(reversed(idx))


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def compare_tensor(actual: torch.Tensor, reference: torch.Tensor, tol: Tolerance) -> Comparison:
    """Judge one output. The reference is float64 (or the exact integer result) on the CPU."""
    problems: list[str] = []
    if tuple(actual.shape) != tuple(reference.shape):
        return Comparison(False, problems=[f"shape {list(actual.shape)} != reference {list(reference.shape)}"])
    a = actual.detach().to("cpu")
    b = reference.detach().to("cpu")
    if a.dtype == torch.bool or b.dtype == torch.bool or not (a.is_floating_point() or b.is_floating_point()):
        equal = a.to(torch.int64) == b.to(torch.int64)
        bad = (~equal).flatten().nonzero()
        mismatches = int(bad.numel())
        diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
        max_abs = float(diff.max()) if diff.numel() else 0.0
        comp = Comparison(mismatches == 0, max_abs=max_abs, max_rel=None, nmse=None, reference_rms=rms(b))
        if mismatches:
            comp.worst_index = _unravel(int(bad[0]), a.shape)
            problems.append(f"{mismatches} of {a.numel()} elements differ (exact result expected)")
        comp.problems = problems
        return comp

    a64 = a.to(torch.float64)
    b64 = b.to(torch.float64)
    if tol.rtol == 0.0 and tol.atol == 0.0 and a.is_floating_point():
        b64 = b64.to(a.dtype).to(torch.float64)  # exact results: the reference value as the dtype holds it
    # The reference as the output dtype can hold it: a true value beyond the dtype's range is inf there.
    b_out = b64.to(a.dtype).to(torch.float64) if a.is_floating_point() else b64
    expect_finite = torch.isfinite(b_out)
    a_finite = torch.isfinite(a64)
    wrong_nonfinite = expect_finite & ~a_finite
    # Where the reference (as output dtype) is non-finite, the result must match it (same inf, or NaN).
    nf_expected = ~expect_finite
    nf_match = (a64 == b_out) | (torch.isnan(a64) & torch.isnan(b_out))
    wrong_special = nf_expected & ~nf_match
    bad_special = (wrong_nonfinite | wrong_special).flatten().nonzero()

    ref_rms = rms(b64)
    diff = torch.where(expect_finite & a_finite, (a64 - b64).abs(), torch.zeros_like(a64))
    absb = b64.abs()
    allowed = tol.atol + tol.rtol * torch.where(expect_finite, absb, torch.zeros_like(absb))
    if diff.numel():
        max_abs = float(diff.max())
        # relative error over elements whose reference is non-zero (a zero reference has no relative scale;
        # such elements are judged by atol and show in max_abs)
        nonzero = (absb > 0) & expect_finite
        rel = torch.where(nonzero, diff / absb.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(diff))
        max_rel = float(rel.max())
        denom = float(b64[expect_finite].pow(2).sum())
        num = float(diff.pow(2).sum())
        nmse = num / denom if denom > 0 else (0.0 if num == 0 else math.inf)
        exact_only = tol.rtol == 0.0 and tol.atol == 0.0
        violation = (diff > 0).to(torch.float64) if exact_only else diff / allowed
        worst_flat = int(violation.flatten().argmax())
        over = int((violation > 1.0).sum()) if tol.rtol or tol.atol else int((diff > 0).sum())
    else:
        max_abs, max_rel, nmse, worst_flat, over = 0.0, 0.0, 0.0, 0, 0

    comp = Comparison(True, max_abs=_finite_or_none(max_abs), max_rel=_finite_or_none(max_rel),
                      nmse=_finite_or_none(nmse), reference_rms=ref_rms)
    if bad_special.numel():
        comp.passed = False
        comp.worst_index = _unravel(int(bad_special[0]), a.shape)
        problems.append(f"{int(bad_special.numel())} elements non-finite where the reference is finite "
                        "(or the wrong non-finite value)")
    if over:
        comp.passed = False
        if comp.worst_index is None:
            comp.worst_index = _unravel(worst_flat, a.shape)
        problems.append(f"{over} of {a.numel()} elements outside rtol={tol.rtol:.3g} atol={tol.atol:.3g}")
    elif comp.worst_index is None and diff.numel():
        comp.worst_index = _unravel(worst_flat, a.shape)
    comp.problems = problems
    return comp


def merge(parts: list[Comparison]) -> Comparison:
    """Worst-of for tuple results: failing parts first, then the largest error."""
    if len(parts) == 1:
        return parts[0]

    def worst_key(item: tuple[int, Comparison]) -> tuple[int, float]:
        return (0 if item[1].passed else 1, item[1].nmse or 0.0)

    pos, worst = max(enumerate(parts), key=worst_key)
    out = Comparison(
        all(p.passed for p in parts),
        max_abs=max((p.max_abs for p in parts if p.max_abs is not None), default=None),
        max_rel=max((p.max_rel for p in parts if p.max_rel is not None), default=None),
        nmse=max((p.nmse for p in parts if p.nmse is not None), default=None),
        worst_index=worst.worst_index,
        worst_output=pos,
        reference_rms=worst.reference_rms,
    )
    for i, p in enumerate(parts):
        out.problems.extend(f"output {i}: {msg}" for msg in p.problems)
    return out
