"""A step's token budget, and chunked prefill: how many of a sequence's new tokens one step runs.

A decode runs its one token. A prompt runs whole when the step carries no decode (the fastest first token), up to
the step's budget. While other sequences decode, the step's prompt tokens together are capped at the plan's
`prefill_chunk` (chosen from measured step times, engine/prefill_timing.py), so a long prompt arriving mid-stream is
prefilled a chunk per step beside the decodes instead of stalling them for its whole prefill. A prompt that scores
its own tokens (`prompt_logprobs`) runs whole, as before (its scores come from one forward over every position).
"""

from __future__ import annotations

from bringup.runner.engine.sequence import Sequence


class StepBudget:
    def __init__(self, max_tokens: int, prefill_chunk: int | None, running: list[Sequence]) -> None:
        decodes = sum(1 for seq in running if seq.num_new_tokens == 1)
        self.tokens = max_tokens
        # prompt tokens this step may carry: a chunk beside decodes, else what the budget leaves
        self.prompt = max_tokens - decodes if prefill_chunk is None or not decodes else min(prefill_chunk,
                                                                                             max_tokens - decodes)
        self.chunked = prefill_chunk is not None

    def fits(self, seq: Sequence, new: int) -> int:
        """How many of `seq`'s `new` tokens this step can run (0: none)."""
        if new <= 1:
            return new if self.tokens >= new else 0
        room = min(self.prompt, self.tokens)
        if not self.chunked or seq.scores_prompt_now:
            return new if new <= room else 0
        return min(new, max(room, 0))

    def take(self, seq: Sequence, new: int) -> int:
        """`fits`, and those tokens spent."""
        run = self.fits(seq, new)
        self.spend(run, prompt=new > 1)
        return run

    def spend(self, run: int, prompt: bool) -> None:
        self.tokens -= run
        if prompt:
            self.prompt -= run
