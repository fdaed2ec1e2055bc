"""Per-position comparison of the run's next-token distributions with a reference's (as llama-perplexity's
--kl-divergence): KL(reference || run), whether the reference's top token is the run's top token, and the
reference's own negative log-likelihood of the actual next token.

Against a full reference distribution the KL divergence is exact. Against a top-k reference it is taken over the
reference's k tokens plus one bin for the rest of the vocabulary: merging tokens into one bin never raises a KL
divergence (the log-sum inequality), so it is a lower bound of the full one, tight when the rest's mass is small.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

EMPTY_REST = -80.0  # log of a mass (1.8e-35) that stands for "none": the rest bin's term stays finite and ~0


@dataclass
class PositionComparison:
    kl: torch.Tensor  # [positions] float64
    top1_agrees: torch.Tensor  # [positions] bool; an exact tie at the top counts as agreement
    reference_nll: torch.Tensor  # [positions] float64
    rest_mass: torch.Tensor | None = None  # [positions] float64: the reference's mass outside its top k


@dataclass
class TopK:
    """A reference's top-k log-probabilities per scored position (descending), and its log-probability of the
    token that actually came next."""

    ids: torch.Tensor  # [positions, k] int64
    logprobs: torch.Tensor  # [positions, k] float32
    target_logprobs: torch.Tensor  # [positions] float32


def top_k(logprobs: torch.Tensor, targets: torch.Tensor, k: int) -> TopK:
    values, ids = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)
    return TopK(ids.cpu(), values.float().cpu(), target_logprobs(logprobs, targets).float().cpu())


def target_logprobs(logprobs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return logprobs.gather(-1, targets.to(logprobs.device).unsqueeze(-1)).squeeze(-1)


def agrees_at_top(logprobs: torch.Tensor, reference_top: torch.Tensor) -> torch.Tensor:
    """Whether the reference's top token is (one of) the run's top tokens, per position."""
    chosen = logprobs.gather(-1, reference_top.to(logprobs.device).unsqueeze(-1)).squeeze(-1)
    return (chosen >= logprobs.max(dim=-1).values).cpu()


def compare_full(logprobs: torch.Tensor, reference: torch.Tensor, targets: torch.Tensor) -> PositionComparison:
    """Against a full reference distribution (log-probabilities [positions, vocab]): exact KL divergence."""
    ref = reference.cpu().double()  # float64 on the host: a device may refuse it
    run = logprobs.cpu().double()
    kl = (ref.exp() * (ref - run)).sum(dim=-1).clamp_min(0.0)
    return PositionComparison(kl, agrees_at_top(logprobs, ref.argmax(dim=-1)),
                              -target_logprobs(ref, targets))


def compare_top_k(logprobs: torch.Tensor, reference: TopK) -> PositionComparison:
    """Against a top-k reference: KL over its k tokens plus the rest as one bin (a lower bound of the full KL)."""
    ref = reference.logprobs.double()
    run = logprobs.gather(-1, reference.ids.to(logprobs.device)).cpu().double()
    ref_rest, run_rest = _rest_logprob(ref), _rest_logprob(run)
    rest_mass = ref_rest.exp()
    kl = ((ref.exp() * (ref - run)).sum(dim=-1) + rest_mass * (ref_rest - run_rest)).clamp_min(0.0)
    return PositionComparison(kl, agrees_at_top(logprobs, reference.ids[:, 0]),
                              -reference.target_logprobs.double(), rest_mass)


def _rest_logprob(top: torch.Tensor) -> torch.Tensor:
    """log(1 - sum(exp(top))) per row, floored at EMPTY_REST where rounding leaves the rest no mass at all."""
    covered = torch.logsumexp(top, dim=-1).clamp_max(0.0)
    return torch.log(-torch.expm1(covered)).clamp_min(EMPTY_REST)
