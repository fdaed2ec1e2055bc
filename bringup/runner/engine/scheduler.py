"""Continuous batching: each step runs every running sequence's next token and admits waiting ones.

Budgets are plain numbers (tokens per step, sequences, KV blocks) taken from the execution plan.
When blocks run out the newest running sequence is preempted: its blocks are freed and it is
recomputed later from its tokens (prompt + generated so far).
"""

from __future__ import annotations

from collections import deque

from bringup.log import get_logger
from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.sequence import SeqStatus, Sequence

log = get_logger("runner.scheduler")


class Scheduler:
    def __init__(self, blocks: BlockManager, max_num_seqs: int, max_num_batched_tokens: int) -> None:
        self.blocks = blocks
        self.max_num_seqs, self.max_num_batched_tokens = max_num_seqs, max_num_batched_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []  # in arrival order
        self.num_preemptions = 0

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[Sequence]:
        """Pick this step's sequences; each runs its `num_new_tokens` tokens."""
        budget = self.max_num_batched_tokens
        scheduled: list[Sequence] = []
        queue = list(self.running)
        while queue:
            seq = queue.pop(0)
            if not self._make_room(seq, queue):
                break
            self.blocks.grow(seq, len(seq.token_ids))
            scheduled.append(seq)
            budget -= seq.num_new_tokens
        self.running = list(scheduled)
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            prefix = None if seq.scores_prompt_now else self.blocks.cached_prefix(seq)  # scoring runs every position
            new = len(seq.token_ids) - len(prefix or []) * self.blocks.block_size
            if new > budget or not self.blocks.can_admit(seq, prefix or [], len(seq.token_ids)):
                break
            self.waiting.popleft()
            self.blocks.admit(seq, prefix, len(seq.token_ids))
            seq.status = SeqStatus.RUNNING
            self.running.append(seq)
            scheduled.append(seq)
            budget -= seq.num_new_tokens
        return scheduled

    def _make_room(self, seq: Sequence, queue: list[Sequence]) -> bool:
        """Preempt the newest sequences until `seq` can grow; False if `seq` itself had to go."""
        while not self.blocks.can_grow(seq, len(seq.token_ids)):
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
