"""Turn a step's logits into next tokens, batched on the model's device: penalties, temperature, top-k,
top-p, min-p, seeded draws, logprobs.

Each sampled row draws one uniform from its own generator (seq.generator, on the CPU) and picks its token
by inverse CDF over its own probabilities, so a seeded request gets the same tokens whatever its batch
neighbours are. Rows with a top-p nucleus draw over their probabilities sorted in descending order (the
step's one sort, stable so that ties keep one order); the other rows draw in vocabulary order, with top-k
and min-p applied as thresholds (the k-th largest logit, min_p × the largest probability).

Sampling is robust to extreme parameters: logits are shifted by their row maximum before the temperature
divides them (a temperature of 1e-30 cannot overflow), the most probable token always survives the filters
(top_p=1e-300 does not mask every token), and a row whose distribution is unusable (NaN or infinite logits)
falls back to argmax — one bad request never fails the step for its neighbours. That token is never served:
the engine finishes such a row's request with finish_reason "error" (engine.py, non-finite logits).
"""

from __future__ import annotations

import torch

from bringup.runner.draws import RowParams, draw_rows, filter_sorted, uses_nucleus
from bringup.runner.engine.outputs import TokenLogprob
from bringup.runner.engine.sequence import Sequence
from bringup.runner.sampling_params import SamplingParams

SampledToken = tuple[int, TokenLogprob | None]


def sample(logits: torch.Tensor, seqs: list[Sequence]) -> list[SampledToken]:
    """One token per row of logits [B, V] (float32, any device); logprobs are of the penalised distribution.

    One device-to-host copy of the B token ids per step (plus the logprobs of the rows that asked).
    """
    params = [s.params for s in seqs]
    if all(p.greedy and p.repetition_penalty == 1.0 and p.logprobs is None for p in params):
        return [(t, None) for t in logits.max(dim=-1).indices.tolist()]  # argmax's answer (the first maximum, NaN
        # counting as the largest) in one vectorised pass: half argmax's time over a 49k vocabulary on the CPU
    logits = apply_repetition_penalty(logits, seqs)
    tokens = logits.argmax(dim=-1)
    for nucleus in (False, True):
        rows = [i for i, p in enumerate(params) if not p.greedy and uses_nucleus(p.top_p) == nucleus]
        if rows:
            index = _index(rows, logits.device)
            tokens[index] = _draw(logits[index], [seqs[i] for i in rows], nucleus)
    token_ids = tokens.tolist()
    return list(zip(token_ids, _logprobs(logits, tokens, token_ids, params)))


def _index(rows: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long, device=device)


# ---------------------------------------------------------------- penalties

def apply_repetition_penalty(logits: torch.Tensor, seqs: list[Sequence]) -> torch.Tensor:
    """Divide positive / multiply negative logits of every token a sequence has seen (prompt and output)."""
    rows = [i for i, s in enumerate(seqs) if s.params.repetition_penalty != 1.0]
    if not rows:
        return logits
    device = logits.device
    seen = seen_token_mask([seqs[i].token_ids for i in rows], logits.shape[-1], device)
    penalty = torch.tensor([seqs[i].params.repetition_penalty for i in rows], dtype=logits.dtype,
                           device=device)[:, None]
    index = _index(rows, device)
    scores = logits[index]
    penalised = torch.where(scores > 0, scores / penalty, scores * penalty)
    return logits.index_put((index,), torch.where(seen, penalised, scores))


def seen_token_mask(token_lists: list[list[int]], vocab_size: int, device: torch.device) -> torch.Tensor:
    """[R, V] bool: which token ids each row's sequence holds (a padded [R, L] id tensor scattered once)."""
    width = max(len(ids) for ids in token_lists)
    padded = [ids + ids[:1] * (width - len(ids)) for ids in token_lists]  # padding repeats a seen id
    ids = torch.tensor(padded, dtype=torch.long, device=device)
    return torch.zeros(len(token_lists), vocab_size, dtype=torch.bool, device=device).scatter_(1, ids, True)


# ---------------------------------------------------------------- draws

def row_params(seqs: list[Sequence], vocab_size: int, device: torch.device) -> RowParams:
    """Per-row sampling parameters as [R] tensors on the logits' device (one host-to-device copy)."""
    rows = [(s.params.temperature, s.params.top_k, s.params.top_p, s.params.min_p, _uniform(s.generator))
            for s in seqs]
    return RowParams.of_rows(rows, vocab_size, device)


def _uniform(generator: torch.Generator | None) -> float:
    return float(torch.rand((), generator=generator))


def _draw(logits: torch.Tensor, seqs: list[Sequence], nucleus: bool) -> torch.Tensor:
    """A token per row of logits [R, V]; argmax for rows whose distribution is unusable."""
    return draw_rows(logits, row_params(seqs, logits.shape[-1], logits.device), nucleus)


def filter_logits(row: torch.Tensor, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """One row [V] in vocabulary order: logits outside top-k / the top-p nucleus / below min_p × max prob to -inf."""
    sorted_logits, order = row.sort(descending=True, stable=True)

    def param(value: float, dtype: torch.dtype) -> torch.Tensor:
        return torch.tensor([value], dtype=dtype, device=row.device)

    kept = filter_sorted(sorted_logits[None], param(top_k, torch.long), param(top_p, row.dtype),
                         param(min_p, row.dtype))[0]
    return torch.empty_like(row).scatter_(0, order, kept)


# ---------------------------------------------------------------- logprobs

def _logprobs(logits: torch.Tensor, tokens: torch.Tensor, token_ids: list[int],
              params: list[SamplingParams]) -> list[TokenLogprob | None]:
    """log_softmax of the penalised logits (before temperature and filters), for the rows that asked."""
    out: list[TokenLogprob | None] = [None] * len(params)
    rows = [i for i, p in enumerate(params) if p.logprobs is not None]
    if not rows:
        return out
    index = _index(rows, logits.device)
    lp = torch.log_softmax(logits[index], dim=-1)
    top = torch.topk(lp, max(params[i].logprobs or 0 for i in rows), dim=-1)
    values = torch.cat([lp.gather(1, tokens[index][:, None]), top.values], dim=1).tolist()
    for i, row_values, row_indices in zip(rows, values, top.indices.tolist()):
        n = params[i].logprobs or 0
        out[i] = TokenLogprob(token_id=token_ids[i], logprob=row_values[0],
                              top=list(zip(row_indices[:n], row_values[1:n + 1])))
    return out
