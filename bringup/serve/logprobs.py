"""The runner's per-token logprobs in the two OpenAI shapes (legacy completions, chat)."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from bringup.serve.requests.schemas import (
    ChatChoiceLogprobs,
    ChatTokenLogprob,
    CompletionLogprobs,
    TopLogprob,
)


def _finite(x: float) -> float:
    """JSON has no -inf: clamp to the most negative finite float, as other servers do."""
    return x if math.isfinite(x) else -9999.0


class LogprobFormatter:
    def __init__(self, tokenizer: Any) -> None:
        # special tokens are shown, not skipped: a logprob entry must name the token it scores
        self._piece = lru_cache(maxsize=65536)(
            lambda token_id: tokenizer.decode([token_id], skip_special_tokens=False))

    def piece(self, token_id: int) -> str:
        return self._piece(token_id)

    def completion(self, entries: list | None, start_offset: int) -> CompletionLogprobs:
        tokens: list[str] = []
        token_logprobs: list[float | None] = []
        top: list[dict[str, float] | None] = []
        offsets: list[int] = []
        offset = start_offset
        for entry in entries or []:
            text = self.piece(entry.token_id)
            tokens.append(text)
            token_logprobs.append(_finite(entry.logprob))
            alternatives: dict[str, float] = {}
            for token_id, logprob in entry.top:
                alternatives.setdefault(self.piece(token_id), _finite(logprob))
            top.append(alternatives)
            offsets.append(offset)
            offset += len(text)
        return CompletionLogprobs(tokens=tokens, token_logprobs=token_logprobs, top_logprobs=top,
                                  text_offset=offsets)

    def chat(self, entries: list | None) -> ChatChoiceLogprobs:
        content = []
        for entry in entries or []:
            text = self.piece(entry.token_id)
            alternatives = [
                TopLogprob(token=self.piece(t), logprob=_finite(lp), bytes=list(self.piece(t).encode()))
                for t, lp in entry.top
            ]
            content.append(ChatTokenLogprob(token=text, logprob=_finite(entry.logprob),
                                            bytes=list(text.encode()), top_logprobs=alternatives))
        return ChatChoiceLogprobs(content=content)
