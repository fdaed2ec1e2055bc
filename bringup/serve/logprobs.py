"""The runner's per-token logprobs in the two OpenAI shapes (legacy completions, chat)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bringup.runner.engine.outputs import PromptLogprobs
from bringup.serve.requests.schemas import (
    ChatChoiceLogprobs,
    ChatTokenLogprob,
    CompletionLogprobs,
    PromptTokenLogprob,
    TopLogprob,
)


def _finite(x: float) -> float:
    """JSON has no -inf: clamp to the most negative finite float, as other servers do."""
    return x if math.isfinite(x) else -9999.0


@dataclass
class Echo:
    """The prompt's part of an echoed logprobs object: its tokens, their entries (None first) and how many
    alternatives each lists."""

    token_ids: list[int]
    entries: PromptLogprobs
    top: int


class LogprobFormatter:
    def __init__(self, tokenizer: Any) -> None:
        # special tokens are shown, not skipped: a logprob entry must name the token it scores
        self._piece = lru_cache(maxsize=65536)(
            lambda token_id: tokenizer.decode([token_id], skip_special_tokens=False))

    def piece(self, token_id: int) -> str:
        return self._piece(token_id)

    def completion(self, entries: list | None, start_offset: int, echo: Echo | None = None) -> CompletionLogprobs:
        """The legacy shape; with `echo`, the prompt's tokens first (the first one's logprob and alternatives
        null, as nothing predicts it), then the generated ones."""
        rows = [] if echo is None else [(t, e, echo.top) for t, e in zip(echo.token_ids, echo.entries)]
        rows += [(entry.token_id, entry, None) for entry in entries or []]
        tokens: list[str] = []
        token_logprobs: list[float | None] = []
        top: list[dict[str, float] | None] = []
        offsets: list[int] = []
        offset = start_offset
        for token_id, entry, listed in rows:
            text = self.piece(token_id)
            tokens.append(text)
            offsets.append(offset)
            offset += len(text)
            if entry is None:
                token_logprobs.append(None)
                top.append(None)
                continue
            token_logprobs.append(_finite(entry.logprob))
            alternatives: dict[str, float] = {}
            for alternative, logprob in entry.top[:listed]:
                alternatives.setdefault(self.piece(alternative), _finite(logprob))
            top.append(alternatives)
        return CompletionLogprobs(tokens=tokens, token_logprobs=token_logprobs, top_logprobs=top,
                                  text_offset=offsets)

    def prompt(self, entries: PromptLogprobs, listed: int) -> list[dict[str, PromptTokenLogprob] | None]:
        """vLLM's prompt_logprobs: per prompt token after the first, its own entry, then `listed` alternatives."""
        out: list[dict[str, PromptTokenLogprob] | None] = []
        for entry in entries:
            if entry is None:
                out.append(None)
                continue
            ranked = [(entry.token_id, entry.logprob, entry.rank)]
            ranked += [(token_id, logprob, rank) for rank, (token_id, logprob) in enumerate(entry.top[:listed], 1)]
            scores: dict[str, PromptTokenLogprob] = {}
            for token_id, logprob, rank in ranked:
                scores.setdefault(str(token_id), PromptTokenLogprob(logprob=_finite(logprob), rank=rank,
                                                                    decoded_token=self.piece(token_id)))
            out.append(scores)
        return out

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
