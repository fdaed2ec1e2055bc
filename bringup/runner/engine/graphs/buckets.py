"""The sizes decode graphs are captured for: batch-size buckets (1, 2, 4, ... up to max_num_seqs) and context
buckets (the KV slots one captured step attends over, doubling up to max_model_len)."""

from __future__ import annotations

FIRST_CONTEXT = 64  # tokens of context the start-up captures hold; longer contexts are captured when first met


def batch_buckets(max_num_seqs: int) -> list[int]:
    """1, 2, 4, ... below `max_num_seqs`, then `max_num_seqs` itself: a step of n sequences pads to the first >= n."""
    sizes, size = [], 1
    while size < max_num_seqs:
        sizes.append(size)
        size *= 2
    return [*sizes, max_num_seqs]


def context_buckets(max_model_len: int, block_size: int) -> list[int]:
    """Context capacities in whole blocks: FIRST_CONTEXT (or less when the model's context is shorter), doubling,
    the last holding `max_model_len`. A step attends over its bucket's slots, at most twice what it needs."""
    def blocks(tokens: int) -> int:
        return -(-tokens // block_size) * block_size

    last = blocks(max_model_len)
    sizes, size = [], min(blocks(FIRST_CONTEXT), last)
    while size < last:
        sizes.append(size)
        size *= 2
    return [*sizes, last]


def bucket_for(sizes: list[int], needed: int) -> int | None:
    """The smallest of `sizes` holding `needed`, or None when none does."""
    return next((size for size in sizes if size >= needed), None)
