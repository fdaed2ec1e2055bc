"""A step's token budget, and chunked prefill: how many of a sequence's new tokens one step runs.

A decode runs its one token. A prompt runs whole when the step carries no decode (the fastest first token), up to the
step's budget. While other sequences decode, the step's prompt tokens together are capped at the plan's `prefill_chunk`
for the decodes' number and context and the context the prompt has reached (a table chosen from measured step times,
plan/prefill_chunk.py), so a long prompt arriving mid-stream is prefilled a chunk per step beside the decodes instead of
stalling them for its whole prefill, in smaller chunks as its context grows. A prompt that scores its own tokens
(`prompt_logprobs`) runs whole, as before (its scores come from one forward over every position).

Chunking trades the prompts' first tokens for the streams' gaps: each step beside the decodes carries less prompt than
it could, so the requests waiting for a first token wait longer, and the decoding streams wait less between tokens.
The trade is made for the streams while they are at least as many as the requests waiting for a first token (one long
prompt arriving among streams: the case the table is bounded for; a preempted sequence waiting to be recomputed counts
with them, as it waits for its next token on a prefill too). When those requests outnumber the streams -- a burst
beside the first request's stream, prompts queueing faster than they are prefilled -- the prompts run whole, as the
majority of the users waiting would have them.

A stream counts only while chunking can still keep its inter-token p99 (the gap 99 in 100 stay under) within the
bound: a step that runs more prompt beside it than its chunk would have is a stall in its gaps (`Sequence.stalls`),
and once its stalls exceed one in a hundred of the gaps its max_tokens allow, its p99 is a stall whatever later steps
do, so chunking for it would cost the prompts waiting their first tokens and buy it nothing.
"""

from __future__ import annotations

from bringup.runner.engine.sequence import Sequence
from bringup.runner.plan.prefill_chunk import chunk_at

STALL_SHARE = 0.01  # the gaps of a stream that may exceed its p99


def p99_kept(seq: Sequence) -> bool:
    """Whether the stream's stalls so far still leave its inter-token p99 within the chunk's bound."""
    return seq.stalls <= int(STALL_SHARE * (seq.params.max_tokens - 1))


class StepBudget:
    def __init__(self, max_tokens: int, prefill_chunk: list[list[int]] | None, running: list[Sequence],
                 waiting: int = 0) -> None:
        """`waiting`: the requests not yet admitted (those running a prompt's chunks are counted from `running`)."""
        self.tokens = max_tokens
        self.decoding = [seq for seq in running if seq.num_new_tokens == 1]
        self.decodes = len(self.decoding)
        self.their_context = sum(len(seq.token_ids) for seq in self.decoding) // max(self.decodes, 1)
        self.whole = max_tokens - self.decodes  # room the decodes leave
        first_token = waiting + len(running) - self.decodes  # the requests waiting on a prefill for their next token
        kept = sum(p99_kept(seq) for seq in self.decoding)
        # prompts run whole when nothing decodes, or when the streams whose gaps chunking would still protect are
        # outnumbered by the requests it costs: those waiting for a first token and the streams already stalled past
        # their p99 (for whom a chunk step is a slower step that buys nothing)
        self.chunks = prefill_chunk if 0 < kept >= first_token + self.decodes - kept else None
        self.prompt_spent = 0
        self.table = prefill_chunk

    def stalled(self) -> list[Sequence]:
        """The decoding streams this step stalls: prompts run whole beside them, more than their chunk at no context
        (the largest the table gives) would have carried."""
        if self.table is None or self.chunks is not None or not self.decoding:
            return []
        if self.prompt_spent <= chunk_at(self.table, self.decodes, self.their_context, 0):
            return []
        return self.decoding

    def fits(self, seq: Sequence, new: int) -> int:
        """How many of `seq`'s `new` tokens this step can run (0: none)."""
        if new <= 1:
            return new if self.tokens >= new else 0
        context = len(seq.token_ids) - new
        allowed = self.whole
        if self.chunks is not None:
            allowed = min(chunk_at(self.chunks, self.decodes, self.their_context, context), allowed)
        room = min(allowed - self.prompt_spent, self.tokens)
        if self.table is None or seq.scores_prompt_now:
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
            self.prompt_spent += run
