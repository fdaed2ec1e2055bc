"""Continuous batching: each step runs every running sequence's next token and admits waiting ones.

Budgets are plain numbers (tokens per step, sequences, KV blocks) taken from the execution plan.
When blocks run out the newest running sequence is preempted: its blocks are freed and it is
recomputed later from its tokens (prompt + generated so far).
"""

from __future__ import annotations

from collections import deque

from bringup.log import get_logger
from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.chunks import StepBudget
from bringup.runner.engine.sequence import SeqStatus, Sequence

log = get_logger("runner.scheduler")


class Scheduler:
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_num_batched_tokens: int,
                 prefill_chunk: list[list[int]] | None = None) -> None:
        self.blocks = blocks
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        # [context, prompt tokens a step may carry beside decodes] pairs (None: whole prompts)
        self.prefill_chunk = prefill_chunk
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # in arrival order
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[Sequence]:
        """Pick this step's sequences; each runs `num_scheduled_tokens` of its new tokens (chunks.py)."""
        budget = StepBudget(self.max_num_batched_tokens, self.prefill_chunk, self.running, len(self.waiting))
        scheduled: list[Sequence] = []
        staying: list[Sequence] = []
        queue = list(self.running)
        while queue:
            seq = queue.pop(0)
            run = budget.take(seq, seq.num_new_tokens)
            if not run:  # a prompt's next chunk waits for room in a later step
                staying.append(seq)
                continue
            if not self._make_room(seq, queue, seq.num_cached_tokens + run):
                break
            self.blocks.grow(seq, seq.num_cached_tokens + run)
            seq.num_scheduled_tokens = run
            scheduled.append(seq)
            staying.append(seq)
        self.running = staying
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            prefix = None if seq.scores_prompt_now else self.blocks.cached_prefix(seq)  # scoring runs every position
            cached = len(prefix or []) * self.blocks.block_size
            new = len(seq.token_ids) - cached
            run = budget.fits(seq, new)
            if not run or not self.blocks.can_admit(seq, prefix or [], cached + run):
                break
            if prefix is not None and self.blocks.computing(seq, prefix, self.running):
                break  # its next block is being computed: cached for it a step later
            budget.spend(run, prompt=new > 1)
            self.waiting.popleft()
            self.blocks.admit(seq, prefix, cached + run)
            seq.num_scheduled_tokens = run
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
            scheduled.append(seq)
        for seq in budget.stalled():
            if seq in scheduled:  # not preempted this step
                seq.stalls += 1
        return scheduled

    def _make_room(self, seq: Sequence, queue: list[Sequence], num_tokens: int) -> bool:
        """Preempt the newest sequences until `seq` can grow; False if `seq` itself had to go."""
        while not self.blocks.can_grow(seq, num_tokens):
            if queue:
                self._preempt(queue.pop())
            else:
                self._preempt(seq)
                return False
        return True

    def _preempt(self, seq: Sequence) -> None:
        log.debug("preempting %s (%d tokens): out of KV blocks; it will be recomputed",
                  seq.request_id, len(seq.token_ids))
        self.blocks.free(seq)
        seq.status = SeqStatus.WAITING
        seq.num_preemptions += 1
        self.num_preemptions += 1
        self.waiting.appendleft(seq)

    def finish(self, seq: Sequence) -> None:
        """Remove a finished or aborted sequence and free its blocks."""
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.blocks.free(seq)
        seq.status = SeqStatus.FINISHED
