"""Chunk steps timed on the served model at start-up, for the prefill chunk (plan/prefill_chunk.py).

One decode step of one sequence, then steps of that decode and a prompt chunk of MIN_CHUNK, 2 x, 4 x, ... tokens in
one forward, each the best of REPEATS (interference only adds time), stopping at the first size past what a chunk
may take; then the same steps with the chunk's prompt at a long context. The K/V go to the cache's first blocks,
before any request holds one; what the context's slots hold does not change the time.
"""

from __future__ import annotations

from bringup.runner.engine.best_of import best_of
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.prefill_chunk import (
    CHUNK_STEP_RATIO,
    CONTEXT_TIMED,
    FIRST_CONTEXT,
    PrefillTimings,
    chunk_sizes,
)

REPEATS = 3


def measure_prefill(executor: Executor, plan: ExecutionPlan) -> PrefillTimings | None:
    """The timings, or None when the cache cannot hold the smallest chunk and a decode."""
    size, room = plan.block_size, plan.kv_blocks.value * plan.block_size
    sizes = [n for n in chunk_sizes(plan.max_model_len.value) if n + 2 * size <= room]
    if not sizes:
        return None
    blocks = plan.kv_blocks.value
    decoding = SeqChunk([1] * (size + 1), size, [blocks - 2, blocks - 1])  # the cache's last two blocks
    table, tokens = list(range(blocks - 2)), [1 + i % 97 for i in range(room)]
    executor.run_chunks([SeqChunk(decoding.token_ids, 0, decoding.block_table)])  # warm: a first forward of a shape
    device = executor.model.device

    def step(tokens_new: int, context: int) -> float:
        chunk = SeqChunk(tokens[:context + tokens_new], context, table)
        return best_of(lambda: executor.run_chunks([decoding, chunk]), device, REPEATS)

    decode = best_of(lambda: executor.run_chunks([decoding]), device, REPEATS)
    by_tokens: dict[int, float] = {}
    for n in sizes:
        by_tokens[n] = step(n, 0)
        if by_tokens[n] > CHUNK_STEP_RATIO * decode:
            break
    context = min(CONTEXT_TIMED, plan.max_model_len.value - max(by_tokens) - 1, len(table) * size - max(by_tokens))
    at_context = {n: step(n, context) for n in by_tokens} if context >= FIRST_CONTEXT else {}
    return PrefillTimings(decode, by_tokens, f"best of {REPEATS}", context if at_context else 0, at_context)
