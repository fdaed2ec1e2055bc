"""A host kernel's results and the plain path's, each against float64 from the same inputs: the numbers the plan's
accuracy rule reads (plan/host_kernels.accuracy_verdict)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class KernelCheck:
    error: float  # the kernel's worst error against float64, relative to the largest output (inf: declined, NaN)
    plain_error: float  # the plain path's, from the same inputs
    scale_error: float  # least-squares scale of every kernel output against float64, minus 1: rounding leaves it ~0


def against_float64(cases: list[tuple[torch.Tensor | None, torch.Tensor, torch.Tensor]]) -> KernelCheck:
    """(kernel output or None where it declined, plain output, float64 reference) of each case."""
    worst = worst_plain = products = energy = 0.0
    for got, plain, reference in cases:
        largest = float(reference.abs().max())
        worst_plain = max(worst_plain, float((plain.double() - reference).abs().max()) / largest)
        if got is None or not bool(torch.isfinite(got).all()):
            worst = float("inf")
            continue
        worst = max(worst, float((got.double() - reference).abs().max()) / largest)
        products, energy = products + float((got.double() * reference).sum()), energy + float(reference.pow(2).sum())
    if worst == float("inf") or not energy:
        return KernelCheck(worst, worst_plain, float("inf"))
    return KernelCheck(worst, worst_plain, products / energy - 1.0)
