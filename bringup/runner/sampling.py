"""Turn a step's logits into next tokens: penalties, temperature, top-k, top-p, min-p, seeded draws.

Sampling is robust to extreme parameters: logits are scaled in float64 (a temperature of 1e-8 does
not overflow), the most probable token always survives the filters (top_p=1e-300 does not mask
every token), and a row whose distribution is still unusable falls back to argmax — one bad request
never fails the step for its neighbours.
"""

from __future__ import annotations

import torch

from bringup.runner.outputs import TokenLogprob
from bringup.runner.sequence import Sequence

MIN_TEMPERATURE = 1e-30  # smaller temperatures are this one: float64 logits / 1e-30 stay finite


def sample(logits: torch.Tensor, seqs: list[Sequence]) -> list[tuple[int, TokenLogprob | None]]:
    """One token per row of logits [B, V] (float32, CPU); logprobs are of the penalised distribution."""
    if all(s.params.greedy and s.params.repetition_penalty == 1.0 and s.params.logprobs is None for s in seqs):
        return [(t, None) for t in logits.argmax(dim=-1).tolist()]
    return [_sample_row(logits[i].clone(), seq) for i, seq in enumerate(seqs)]


def _sample_row(row: torch.Tensor, seq: Sequence) -> tuple[int, TokenLogprob | None]:
    p = seq.params
    if p.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(seq.token_ids)), dtype=torch.long)
        scores = row[seen]
        row[seen] = torch.where(scores > 0, scores / p.repetition_penalty, scores * p.repetition_penalty)
    if p.greedy:
        token = int(row.argmax())
    else:
        scaled = row.double() / max(p.temperature, MIN_TEMPERATURE)
        probs = torch.softmax(filter_logits(scaled, p.top_k, p.top_p, p.min_p), dim=-1)
        usable = bool(torch.isfinite(probs).all()) and float(probs.sum()) > 0.0
        token = int(torch.multinomial(probs, 1, generator=seq.generator)) if usable else int(scaled.argmax())
    return token, (None if p.logprobs is None else _logprob(row, token, p.logprobs))


def filter_logits(row: torch.Tensor, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """Set logits outside top-k / the top-p nucleus / below min_p × max prob to -inf."""
    if 0 < top_k < row.numel():
        kth = torch.topk(row, top_k).values[-1]
        row = row.masked_fill(row < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(row, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(-1) - probs >= top_p  # keep the smallest prefix whose mass reaches top_p
        drop[0] = False  # ... and never less than the most probable token
        row = row.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
    if min_p > 0.0:
        probs = torch.softmax(row, dim=-1)
        row = row.masked_fill(probs < min_p * probs.max(), float("-inf"))
    return row


def _logprob(row: torch.Tensor, token: int, k: int) -> TokenLogprob:
    lp = torch.log_softmax(row, dim=-1)
    top = torch.topk(lp, k) if k > 0 else None
    pairs = [] if top is None else list(zip(top.indices.tolist(), top.values.tolist()))
    return TokenLogprob(token_id=token, logprob=float(lp[token]), top=pairs)
