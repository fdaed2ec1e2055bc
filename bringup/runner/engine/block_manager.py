"""Fixed-size KV blocks: a free list and per-sequence block tables."""

from __future__ import annotations

from collections import deque

from bringup.runner.engine.sequence import Sequence


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.num_blocks, self.block_size = num_blocks, block_size
        self._free: deque[int] = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def blocks_needed(self, seq: Sequence, num_tokens: int) -> int:
        """Extra blocks `seq` needs so that `num_tokens` tokens fit."""
        return max(0, -(-num_tokens // self.block_size) - len(seq.block_table))

    def can_grow(self, seq: Sequence, num_tokens: int) -> bool:
        return self.blocks_needed(seq, num_tokens) <= len(self._free)

    def grow(self, seq: Sequence, num_tokens: int) -> None:
        """Append free blocks to the table until `num_tokens` tokens fit (caller checked can_grow)."""
        for _ in range(self.blocks_needed(seq, num_tokens)):
            seq.block_table.append(self._free.popleft())

    def free(self, seq: Sequence) -> None:
        """Return all of the sequence's blocks; its cached tokens are forgotten."""
        self._free.extend(seq.block_table)
        seq.block_table = []
        seq.num_cached_tokens = 0
