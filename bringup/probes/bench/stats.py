"""Robust summary statistics of timing samples (median, interquartile range, min)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method) of already sorted values."""
    if not sorted_values:
        raise ValueError("quantile of no values")
    position = (len(sorted_values) - 1) * q
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


@dataclass(frozen=True)
class SampleStats:
    """Summary of per-call times in seconds."""

    median: float
    q1: float
    q3: float
    min: float
    count: int

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def rel_iqr(self) -> float:
        """IQR / median: the harness's stability measure (inf when the median is zero)."""
        return self.iqr / self.median if self.median > 0 else float("inf")


def summarize(samples: Sequence[float]) -> SampleStats:
    """Median, quartiles and minimum of the samples."""
    ordered = sorted(samples)
    return SampleStats(
        median=quantile(ordered, 0.5),
        q1=quantile(ordered, 0.25),
        q3=quantile(ordered, 0.75),
        min=ordered[0],
        count=len(ordered),
    )
