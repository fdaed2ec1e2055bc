"""Prefill steps timed on the served model at start-up, for the prefill chunk (plan/prefill_chunk.py).

One decode step of one sequence, then prefill steps of 1, 2, 4, ... blocks of prompt, each the best of REPEATS
(interference only adds time), stopping at the first size past what a chunk may take. The K/V go to the cache's
first blocks, before any request holds one.
"""

from __future__ import annotations

from bringup.runner.engine.best_of import best_of
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.prefill_chunk import CHUNK_STEP_RATIO, PrefillTimings, chunk_sizes

REPEATS = 3


def measure_prefill(executor: Executor, plan: ExecutionPlan) -> PrefillTimings | None:
    """The timings, or None when the cache cannot hold the largest prompt timed plus one token."""
    size = plan.block_size
    sizes = chunk_sizes(size, plan.max_model_len.value)
    blocks = -(-(sizes[-1] + 1) // size)
    if blocks > plan.kv_blocks.value:
        sizes = [n for n in sizes if n < plan.kv_blocks.value * size]
        blocks = plan.kv_blocks.value
    if not sizes:
        return None
    table, tokens = list(range(blocks)), [1 + i % 97 for i in range(sizes[-1] + 1)]
    executor.run_chunks([SeqChunk(tokens[:size + 1], 0, table)])  # warm: the first forward of a shape
    device = executor.model.device
    decode = best_of(lambda: executor.run_chunks([SeqChunk(tokens[:size + 1], size, table)]), device, REPEATS)
    by_tokens: dict[int, float] = {}
    for n in sizes:
        by_tokens[n] = best_of(lambda n=n: executor.run_chunks([SeqChunk(tokens[:n], 0, table)]), device, REPEATS)
        if by_tokens[n] > (CHUNK_STEP_RATIO - 1) * decode:
            break
    return PrefillTimings(decode, by_tokens, f"best of {REPEATS}")
