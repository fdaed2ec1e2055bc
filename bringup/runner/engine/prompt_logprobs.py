"""Prompt logprobs (vLLM's `prompt_logprobs`): each prompt token's logprob under the model, from the hidden
states of the prompt's own prefill.

The logits are the model's raw ones (no temperature, no penalty: what vLLM scores prompts with), log_softmax
in float32, a few hundred positions at a time so a long prompt never holds [prompt, vocabulary] at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from bringup.runner.engine.outputs import PromptLogprobs, TokenLogprob

POSITIONS_PER_HEAD_CALL = 256


@dataclass
class ScoredPrompt:
    logprobs: PromptLogprobs  # None first, then one entry per prompt token after the first
    non_finite_at: int | None = None  # the first prompt position whose logits hold NaN or inf, if any


def score_prompt(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, token_ids: list[int],
                 start: int, top_k: int) -> ScoredPrompt:
    """hidden [n, H]: the states at positions start .. start+n-1, each predicting the token after it."""
    scored = ScoredPrompt(logprobs=[None] if start == 0 else [])
    for first in range(0, hidden.shape[0], POSITIONS_PER_HEAD_CALL):
        rows = hidden[first:first + POSITIONS_PER_HEAD_CALL]
        logits = head(rows).float()
        finite = torch.isfinite(logits.amax(dim=-1))
        if scored.non_finite_at is None and not bool(finite.all()):
            scored.non_finite_at = start + first + int((~finite).nonzero()[0, 0]) + 1
        at = start + first + 1
        targets = torch.tensor(token_ids[at:at + rows.shape[0]], dtype=torch.long, device=logits.device)
        scored.logprobs.extend(_entries(torch.log_softmax(logits, dim=-1), targets, top_k))
    return scored


def _entries(logprobs: torch.Tensor, targets: torch.Tensor, top_k: int) -> list[TokenLogprob]:
    """Each row's target token: its logprob, rank and the top_k alternatives (one device-to-host copy)."""
    chosen = logprobs.gather(1, targets[:, None])
    ranks = (logprobs > chosen).sum(dim=-1) + 1
    top = torch.topk(logprobs, top_k, dim=-1)
    values = torch.cat([chosen, top.values], dim=1).tolist()
    return [TokenLogprob(token_id=token, logprob=row[0], top=list(zip(indices, row[1:])), rank=rank)
            for token, row, indices, rank in zip(targets.tolist(), values, top.indices.tolist(), ranks.tolist())]
