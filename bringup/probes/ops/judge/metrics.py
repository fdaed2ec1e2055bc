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
    bound: float | None = None  # the allowed error at the worst element (bound or tolerance)
    bound_ratio: float | None = None  # the largest error / allowed error: above 1 fails
    bias: float | None = None  # least-squares scale of result against reference, minus 1
    bias_z: float | None = None  # the bias over its standard error
    decided_by: str | None = None  # exact | bound | bias | tolerance | special values | chi-square


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


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _compare_exact(a: torch.Tensor, b: torch.Tensor) -> Comparison:
    """Integer, index and boolean results: equal or wrong."""
    bad = (a.to(torch.int64) != b.to(torch.int64)).flatten().nonzero()
    diff = (a.to(torch.float64) - b.to(torch.float64)).abs()
    comp = Comparison(bad.numel() == 0, max_abs=float(diff.max()) if diff.numel() else 0.0, reference_rms=rms(b),
                      decided_by="exact")
    if bad.numel():
        comp.worst_index = _unravel(int(bad[0]), a.shape)
        comp.problems.append(f"{int(bad.numel())} of {a.numel()} elements differ (exact result expected)")
    return comp


def _wrong_specials(a64: torch.Tensor, b_out: torch.Tensor) -> torch.Tensor:
    """Flat indices of non-finite results where the reference (as the output dtype holds it) is finite, or of the
    wrong non-finite value (another inf, or a number instead of NaN)."""
    expect_finite = torch.isfinite(b_out)
    nf_match = (a64 == b_out) | (torch.isnan(a64) & torch.isnan(b_out))
    return ((expect_finite & ~torch.isfinite(a64)) | (~expect_finite & ~nf_match)).flatten().nonzero()


def _error_figures(diff: torch.Tensor, b64: torch.Tensor, finite: torch.Tensor) -> tuple[float, float, float]:
    """max abs, max rel (over non-zero references: a zero has no relative scale) and NMSE."""
    absb = b64.abs()
    nonzero = (absb > 0) & finite
    rel = torch.where(nonzero, diff / absb.clamp_min(torch.finfo(torch.float64).tiny), torch.zeros_like(diff))
    denom, num = float(b64[finite].pow(2).sum()), float(diff.pow(2).sum())
    nmse = num / denom if denom > 0 else (0.0 if num == 0 else math.inf)
    return float(diff.max()), float(rel.max()), nmse


def compare_tensor(actual: torch.Tensor, reference: torch.Tensor, tol: Tolerance,
                   bound: torch.Tensor | None = None) -> Comparison:
    """Judge one output against the float64 reference (or the exact integer result) on the CPU: every element
    within `bound` (the error bound of the op's arithmetic) or, without one, within the tolerance `tol`."""
    if tuple(actual.shape) != tuple(reference.shape):
        return Comparison(False, problems=[f"shape {list(actual.shape)} != reference {list(reference.shape)}"])
    a, b = actual.detach().to("cpu"), reference.detach().to("cpu")
    if a.dtype == torch.bool or b.dtype == torch.bool or not (a.is_floating_point() or b.is_floating_point()):
        return _compare_exact(a, b)
    exact_only = bound is None and tol.rtol == 0.0 and tol.atol == 0.0
    a64, b64 = a.to(torch.float64), b.to(torch.float64)
    if exact_only and a.is_floating_point():
        b64 = b64.to(a.dtype).to(torch.float64)  # exact results: the reference value as the dtype holds it
    # the reference as the output dtype can hold it: a true value beyond the dtype's range is inf there
    b_out = b64.to(a.dtype).to(torch.float64) if a.is_floating_point() else b64
    finite = torch.isfinite(b_out) & torch.isfinite(a64)
    diff = torch.where(finite, (a64 - b64).abs(), torch.zeros_like(a64))
    rule = "exact" if exact_only else "tolerance" if bound is None else "bound"
    if bound is None:
        bound = tol.atol + tol.rtol * torch.where(torch.isfinite(b_out), b64.abs(), torch.zeros_like(b64))
    comp = Comparison(True, reference_rms=rms(b64), max_abs=0.0, max_rel=0.0, nmse=0.0,
                      decided_by=rule)
    if diff.numel():
        max_abs, max_rel, nmse = _error_figures(diff, b64, torch.isfinite(b_out))
        comp.max_abs, comp.max_rel, comp.nmse = (finite_or_none(x) for x in (max_abs, max_rel, nmse))
        ratio = (diff > 0).to(torch.float64) if exact_only else diff / bound
        worst_flat = int(ratio.flatten().argmax())
        comp.worst_index = _unravel(worst_flat, a.shape)
        comp.bound = finite_or_none(float(torch.broadcast_to(bound, diff.shape).flatten()[worst_flat]))
        comp.bound_ratio = finite_or_none(float(ratio.flatten()[worst_flat]))
        over = int((diff > 0).sum()) if exact_only else int((ratio > 1.0).sum())
        if over:
            comp.passed = False
            what = "the exact result" if exact_only else (
                f"rtol={tol.rtol:.3g} atol={tol.atol:.3g}" if rule == "tolerance"
                else "the error bound of the op's arithmetic")
            comp.problems.append(f"{over} of {a.numel()} elements outside {what}")
    specials = _wrong_specials(a64, b_out)
    if specials.numel():
        comp.passed, comp.decided_by = False, "special values"
        comp.worst_index = _unravel(int(specials[0]), a.shape)
        comp.problems.insert(0, f"{int(specials.numel())} elements non-finite where the reference is finite "
                             "(or the wrong non-finite value)")
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
        bound=worst.bound,
        bound_ratio=worst.bound_ratio,
        bias=worst.bias,
        bias_z=worst.bias_z,
        decided_by=worst.decided_by,
    )
    for i, p in enumerate(parts):
        out.problems.extend(f"output {i}: {msg}" for msg in p.problems)
    return out
