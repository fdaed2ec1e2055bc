"""Statistical judgement for sampling ops (multinomial): chi-square goodness of fit."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

# One-sided normal quantile for alpha = 1e-6: a correct sampler fails about once in a million runs.
Z_ALPHA = 4.753424


def chi_square_critical(df: int, z: float = Z_ALPHA) -> float:
    """Wilson-Hilferty approximation of the chi-square upper quantile."""
    if df <= 0:
        return 0.0
    c = 2.0 / (9.0 * df)
    return df * (1.0 - c + z * math.sqrt(c)) ** 3


@dataclass
class SampleVerdict:
    passed: bool
    statistic: float
    critical: float
    problems: list[str]


def judge_multinomial(samples: torch.Tensor, probs: torch.Tensor, replacement: bool) -> SampleVerdict:
    """samples [rows, draws] (or [draws]) drawn from probs [rows, k] (or [k]), probs in float64."""
    s = samples.detach().to("cpu", torch.int64)
    p = probs.detach().to("cpu", torch.float64)
    if s.dim() == 1:
        s, p = s.unsqueeze(0), p.unsqueeze(0)
    problems: list[str] = []
    k = p.shape[-1]
    if s.numel() and (int(s.min()) < 0 or int(s.max()) >= k):
        return SampleVerdict(False, math.inf, 0.0, [f"sample index outside [0, {k})"])
    total_stat, total_df = 0.0, 0
    for row in range(s.shape[0]):
        draws = s[row]
        weights = p[row] / p[row].sum()
        zero = weights == 0
        if bool(zero[draws].any()):
            problems.append(f"row {row}: drew a category with probability 0")
        if not replacement:
            if draws.unique().numel() != draws.numel():
                problems.append(f"row {row}: repeated category without replacement")
            continue
        counts = torch.bincount(draws, minlength=k).to(torch.float64)
        expected = weights * draws.numel()
        keep = expected > 0
        total_stat += float(((counts[keep] - expected[keep]) ** 2 / expected[keep]).sum())
        total_df += int(keep.sum()) - 1
    critical = chi_square_critical(total_df)
    if replacement and total_stat > critical:
        problems.append(f"chi-square {total_stat:.1f} > critical {critical:.1f} (df={total_df}, alpha=1e-6)")
    return SampleVerdict(not problems, total_stat, critical, problems)
