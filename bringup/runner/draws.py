"""The draw itself, on tensors only: temperature, top-k, top-p, min-p and the inverse-CDF pick, per row.

The runner samples through it (engine/sampling.py builds each row's parameters from its request), and verify-ops
judges it against the float64 distribution it was given (probes/ops/catalog/sampler.py). Torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_TEMPERATURE = 1e-30  # smaller temperatures are this one
NEG_INF = float("-inf")


@dataclass
class RowParams:
    """Per-row sampling parameters as [R] tensors on the logits' device (one host-to-device copy)."""

    temperature: torch.Tensor
    top_k: torch.Tensor  # 0 = off
    top_p: torch.Tensor
    min_p: torch.Tensor
    uniform: torch.Tensor  # one draw in [0, 1) from each row's own generator
    max_top_k: int  # the largest top_k in force (below the vocabulary size), 0 when none
    any_min_p: bool

    @classmethod
    def of_rows(cls, rows: list[tuple[float, int, float, float, float]], vocab_size: int,
                device: torch.device) -> RowParams:
        """From each row's (temperature, top_k, top_p, min_p, uniform) as its request gives them: a temperature
        under MIN_TEMPERATURE is MIN_TEMPERATURE and a top_k of the vocabulary's size or more is off; one
        host-to-device copy."""
        top_k = [k if k < vocab_size else 0 for _, k, _, _, _ in rows]
        packed = torch.tensor([[max(t, MIN_TEMPERATURE), k, p, m, u] for (t, _, p, m, u), k in zip(rows, top_k)],
                              dtype=torch.float32)
        t, k, p, m, u = packed.to(device).unbind(dim=1)
        return cls(temperature=t, top_k=k.long(), top_p=p, min_p=m, uniform=u, max_top_k=max(top_k),
                   any_min_p=any(row[3] > 0.0 for row in rows))


def uses_nucleus(top_p: float) -> bool:
    """Whether a request draws over its sorted probabilities (a top-p nucleus) or in vocabulary order."""
    return top_p < 1.0


def draw_rows(logits: torch.Tensor, rp: RowParams, nucleus: bool) -> torch.Tensor:
    """A token per row of logits [R, V] (float32): the nucleus form sorts each row, the other draws in vocabulary
    order; argmax for rows whose distribution is unusable (NaN or infinite logits)."""
    top = logits.max(dim=-1, keepdim=True).values
    usable = torch.isfinite(top)
    scaled = torch.where(usable, (logits - top) / rp.temperature[:, None], 0.0)  # <= 0: cannot overflow
    if nucleus:
        sorted_logits, order = scaled.sort(dim=-1, descending=True, stable=True)
        kept = filter_sorted(sorted_logits, rp.top_k, rp.top_p, rp.min_p)
        drawn = order.gather(1, inverse_cdf(torch.softmax(kept, dim=-1), rp.uniform)[:, None]).squeeze(1)
    else:
        kept = filter_unsorted(scaled, rp)
        drawn = inverse_cdf(torch.softmax(kept, dim=-1), rp.uniform)
    return torch.where(usable.squeeze(1), drawn, logits.argmax(dim=-1))


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The index where each row's cumulative probability first exceeds uniform × its total; never a zero."""
    cdf = probs.cumsum(dim=-1)
    target = uniform[:, None] * cdf[:, -1:]
    index = torch.searchsorted(cdf, target, right=True).squeeze(1)
    last_positive = (probs > 0).cumsum(dim=-1).argmax(dim=-1)  # rounding can put target at the very total
    return torch.minimum(index, last_positive)


def filter_unsorted(scaled: torch.Tensor, rp: RowParams) -> torch.Tensor:
    """Vocabulary order: -inf below each row's k-th largest logit, then below min_p × its largest probability."""
    if rp.max_top_k > 0:
        k = rp.top_k.clamp(min=1, max=rp.max_top_k)[:, None]
        kth = torch.topk(scaled, rp.max_top_k, dim=-1).values.gather(1, k - 1)
        scaled = scaled.masked_fill((scaled < kth) & (rp.top_k > 0)[:, None], NEG_INF)  # ties with the k-th stay
    if rp.any_min_p:
        probs = torch.softmax(scaled, dim=-1)
        scaled = scaled.masked_fill(probs < rp.min_p[:, None] * probs.max(dim=-1, keepdim=True).values, NEG_INF)
    return scaled


def filter_sorted(sorted_logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor,
                  min_p: torch.Tensor) -> torch.Tensor:
    """Rows sorted in descending order: -inf outside top-k / the top-p nucleus / below min_p × max prob.

    What survives is a prefix of each row, never shorter than its first (most probable) entry.
    """
    vocab = sorted_logits.shape[-1]
    k = torch.where((top_k > 0) & (top_k < vocab), top_k, vocab)
    kth = sorted_logits.gather(1, (k - 1)[:, None])
    kept = sorted_logits.masked_fill(sorted_logits < kth, NEG_INF)  # ties with the k-th stay
    probs = torch.softmax(kept, dim=-1)
    drop = (probs.cumsum(dim=-1) - probs >= top_p[:, None]) & (top_p < 1.0)[:, None]
    drop[:, 0] = False  # keep the smallest prefix whose mass reaches top_p, and never less than one token
    kept = kept.masked_fill(drop, NEG_INF)
    probs = torch.softmax(kept, dim=-1)
    return kept.masked_fill(probs < min_p[:, None] * probs[:, :1], NEG_INF)
