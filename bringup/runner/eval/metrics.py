"""The figures an eval reports: perplexity, mean NLL with its standard error, and the reference comparison."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch

from bringup.runner.eval.divergence import PositionComparison

MAX_EXP = math.log(sys.float_info.max)


@dataclass(frozen=True)
class NllSummary:
    tokens: int
    nll: float  # mean negative log-likelihood (nats per token)
    se: float  # its standard error, as llama-perplexity reports it: sqrt(var / (n - 1))
    ppl: float  # exp(nll)


@dataclass(frozen=True)
class ReferenceSummary:
    source: str  # "float64" or the reference file's path
    exact: bool  # False: the KL divergence is a lower bound (top-k reference)
    kld_mean: float
    kld_p99: float
    kld_max: float
    top1_agreement: float  # fraction of positions
    reference_ppl: float
    delta_ppl: float  # this run's ppl minus the reference's
    k: int | None = None
    rest_mass_mean: float | None = None  # the reference's mean mass outside its top k


def perplexity(nll: float) -> float:
    """exp(nll); infinity past what a float holds (a mean NLL above ~709 nats), for the record's check to refuse."""
    return math.exp(nll) if nll < MAX_EXP else math.inf


def summarize_nll(nlls: torch.Tensor) -> NllSummary:
    values = nlls.double()
    n = values.numel()
    mean = float(values.mean())
    variance = float((values.square().mean() - mean * mean).clamp_min(0.0)) if n > 1 else 0.0
    return NllSummary(n, mean, math.sqrt(variance / (n - 1)) if n > 1 else 0.0, perplexity(mean))


def summarize_comparison(parts: list[PositionComparison], run_ppl: float, source: str,
                         k: int | None) -> ReferenceSummary:
    kl = torch.cat([p.kl for p in parts])
    reference_ppl = perplexity(float(torch.cat([p.reference_nll for p in parts]).mean()))
    rest = [p.rest_mass for p in parts if p.rest_mass is not None]
    return ReferenceSummary(
        source=source, exact=not rest, kld_mean=float(kl.mean()), kld_p99=float(torch.quantile(kl, 0.99)),
        kld_max=float(kl.max()), top1_agreement=float(torch.cat([p.top1_agrees for p in parts]).double().mean()),
        reference_ppl=reference_ppl, delta_ppl=run_ppl - reference_ppl, k=k,
        rest_mass_mean=float(torch.cat(rest).mean()) if rest else None)
