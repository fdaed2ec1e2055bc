"""A request's state inside the engine: its tokens, its KV blocks, its sampling state."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import torch

from bringup.runner.engine.outputs import FinishReason, PromptLogprobs, TokenLogprob
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.text.detokenizer import Detokenizer


class SeqStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass
class Sequence:
    request_id: str
    token_ids: list[int]
    num_prompt_tokens: int
    params: SamplingParams
    arrival: int  # admission order; the newest running sequence is preempted first
    status: SeqStatus = SeqStatus.WAITING
    block_table: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0  # tokens whose K/V is in the cache
    num_scheduled_tokens: int = 0  # of its new tokens, those the scheduler gave this step (0: all)
    generator: torch.Generator | None = None
    logprobs: list[TokenLogprob] | None = None
    prompt_logprobs: PromptLogprobs | None = None  # computed once, at the prompt's first prefill
    text: str = ""  # the generated text that later tokens cannot change
    detokenizer: Detokenizer | None = None  # the incremental decode of the output, made at the first token
    finish_reason: FinishReason | None = None
    num_preemptions: int = 0
    # steps that ran more prompt tokens beside this decoding stream than its chunk would have allowed (chunks.py)
    stalls: int = 0

    @property
    def prompt_token_ids(self) -> list[int]:
        return self.token_ids[: self.num_prompt_tokens]

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def scores_prompt_now(self) -> bool:
        """Its prompt logprobs are asked for and not computed yet (a recompute after preemption does not redo them)."""
        return self.params.prompt_logprobs is not None and self.prompt_logprobs is None

    @property
    def step_end(self) -> int:
        """Its tokens the model has seen after this step: all of them, or the end of a prompt's chunk."""
        if self.num_scheduled_tokens:
            return min(len(self.token_ids), self.num_cached_tokens + self.num_scheduled_tokens)
        return len(self.token_ids)

    @property
    def num_new_tokens(self) -> int:
        """Tokens this sequence must run through the model next step."""
        return len(self.token_ids) - self.num_cached_tokens
