"""The bias test: is the error's systematic part (a scale of the result against the reference) beyond what
unbiased rounding can give?

Statistic: the least-squares scale s = sum(a*b) / sum(b^2) of result a against reference b, and z = (s - 1) / SE.
SE is the cluster-robust (sandwich) standard error of s from the residuals r = a - s*b, so a legal but noisy
kernel (long accumulations in the dtype) widens its own SE and is not called biased; it never goes below the
spread that rounding each output (or each cluster's shared statistic) to the dtype gives, u/sqrt(3) per
rounding. Outputs sharing one computed statistic (a softmax row, a norm row) form one cluster; a scan is judged by
its increments, whose errors do not carry forward. Fails when |z| > Z_BIAS with at least MIN_CLUSTERS clusters and
the scale is off by more than u: one rounding of a constant every output shares (a Python scalar, the 1/n of a mean,
a scale factor) may legally scale them all by up to u, and the data's own structure makes tiny systematic parts
(a few hundredths of u measured across the catalog on the CPU's kernels) that many outputs make significant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# two-sided normal tail at 6 sigma is 2e-9; a legal kernel's z stays within a few units across the catalog,
# while a 0.5 % scale in bfloat16 gives z in the tens to hundreds at the catalog's sizes
Z_BIAS = 6.0
MIN_CLUSTERS = 32  # fewer independent clusters give no trustworthy SE (the sandwich needs many)
UNIFORM_SD = 1.0 / math.sqrt(3.0)  # a rounding error uniform in [-u, u] relative has this standard deviation / u


@dataclass(frozen=True)
class BiasResult:
    scale_error: float  # s - 1
    z: float
    clusters: int

    @property
    def decides(self) -> bool:
        return self.clusters >= MIN_CLUSTERS

    floor: float = 0.0  # the largest scale error legal rounding can make systematic (the dtype's u)

    @property
    def biased(self) -> bool:
        return self.decides and abs(self.z) > Z_BIAS and abs(self.scale_error) > self.floor


def _rows(t: torch.Tensor, dim: int | None) -> torch.Tensor:
    """[clusters, members]: rows along `dim` when given, else one element per cluster."""
    if dim is None or t.dim() == 0:
        return t.reshape(-1, 1)
    return t.movedim(dim, -1).reshape(-1, t.shape[dim])


def _increments(t: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.diff(t, dim=dim, prepend=torch.zeros_like(t.narrow(dim, 0, 1)))


def bias_test(actual: torch.Tensor, reference: torch.Tensor, u: float, row_dim: int | None = None,
              scan_dim: int | None = None) -> BiasResult | None:
    """actual and reference float64 of one shape; None when there is nothing to judge (no non-zero reference)."""
    if actual.numel() == 0:
        return None
    if scan_dim is not None and actual.dim():
        actual, reference = _increments(actual, scan_dim), _increments(reference, scan_dim)
    a, b = _rows(actual, row_dim), _rows(reference, row_dim)
    usable = torch.isfinite(a) & torch.isfinite(b)
    a, b = torch.where(usable, a, 0.0), torch.where(usable, b, 0.0)
    energy = float(b.pow(2).sum())
    if energy == 0.0 or not math.isfinite(energy):
        return None
    scale = float((a * b).sum()) / energy
    scores = ((a - scale * b) * b).sum(-1)
    clusters = int((b != 0).any(-1).sum())
    correction = clusters / (clusters - 1) if clusters > 1 else 1.0
    se_data = math.sqrt(float(scores.pow(2).sum()) * correction) / energy
    se_floor = UNIFORM_SD * u * math.sqrt(float(b.pow(2).sum(-1).pow(2).sum())) / energy
    se = max(se_data, se_floor)
    z = (scale - 1.0) / se if se > 0 else (0.0 if scale == 1.0 else math.inf)
    return BiasResult(scale - 1.0, z, clusters, floor=u)
