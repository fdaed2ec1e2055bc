"""What the engine hands back per request and step (the engine API's contract)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "abort", "error"]


@dataclass
class RequestError:
    """Why the engine finished a request with finish_reason "error" (its output must not be served)."""

    code: str  # e.g. "non_finite_logits"
    message: str  # one line: what, why, what to do


@dataclass
class TokenLogprob:
    token_id: int
    logprob: float
    top: list[tuple[int, float]]  # the k most likely tokens, most likely first
    rank: int | None = None  # 1 + how many tokens are more likely (set for prompt tokens)


PromptLogprobs = list[TokenLogprob | None]  # one per prompt token; the first is None (nothing predicts it)


@dataclass
class RequestOutput:
    request_id: str
    prompt_token_ids: list[int]
    token_ids: list[int]  # all generated so far
    text: str  # generated text decided so far; later steps only append (or cut off a matched stop string)
    logprobs: list[TokenLogprob] | None
    finished: bool
    finish_reason: FinishReason | None
    error: RequestError | None = None  # set when finish_reason is "error"
    prompt_logprobs: PromptLogprobs | None = None  # handed back once, in the output of the step that ran the prompt
