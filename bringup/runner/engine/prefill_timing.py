"""Chunk steps timed on the served model at start-up, for the prefill chunk (plan/prefill_chunk.py).

One decode step of one sequence and one of a full batch, then steps of that one decode and a prompt chunk of
MIN_CHUNK, 2 x, 4 x, ... tokens in one forward, each the best of REPEATS (interference only adds time), stopping at
the first size past what a chunk may take beside the most decodes at the longest context the table serves and the
cache holds for them (the smallest chunk, timed first at no context and at a long one, gives what a decode row costs
per token of its context); then the same steps with the chunk's prompt at a long context. The prompt's K/V go to the
cache's first blocks and the decodes' to its last, before any request holds one; what the context's slots hold does
not change the time.
"""

from __future__ import annotations

from bringup.runner.engine.best_of import best_of
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.prefill_chunk import (
    CHUNK_STEP_RATIO,
    CONTEXT_TIMED,
    DECODES_TIMED,
    FIRST_CONTEXT,
    PrefillTimings,
    chunk_sizes,
    decode_counts,
    decodes_step,
    span_starts,
)

REPEATS = 3


def measure_prefill(executor: Executor, plan: ExecutionPlan) -> PrefillTimings | None:
    """The timings, or None when the cache cannot hold the smallest chunk beside the decodes."""
    size, blocks = plan.block_size, plan.kv_blocks.value
    full = min(DECODES_TIMED, plan.max_num_seqs.value)
    room = (blocks - full) * size  # each decoding sequence in one of the cache's last blocks
    sizes = [n for n in chunk_sizes(plan.max_model_len.value) if n < room]
    if not sizes or size < 2:
        return None
    decoding = [SeqChunk([1 + i] * size, size - 1, [blocks - 1 - i]) for i in range(full)]
    table, tokens = list(range(blocks - full)), [1 + i % 97 for i in range(room)]
    for seq in decoding:  # warm: a first forward of each shape
        executor.run_chunks([SeqChunk(seq.token_ids[:-1], 0, seq.block_table)])
    device = executor.model.device

    def step(tokens_new: int, context: int) -> float:
        chunk = SeqChunk(tokens[:context + tokens_new], context, table)
        return best_of(lambda: executor.run_chunks([decoding[0], chunk]), device, REPEATS)

    decode = best_of(lambda: executor.run_chunks(decoding[:1]), device, REPEATS)
    decodes = best_of(lambda: executor.run_chunks(decoding), device, REPEATS) if full > 1 else 0.0
    smallest = sizes[0]
    context = min(CONTEXT_TIMED, plan.max_model_len.value - smallest - 1, room - smallest)
    first = PrefillTimings(decode, {smallest: step(smallest, 0)}, "", context, {smallest: step(smallest, context)},
                           full, decodes) if context >= FIRST_CONTEXT else None
    # the largest chunk any column may take: beside the most decodes at the longest context the table serves that
    # the cache holds for them all
    bound = (CHUNK_STEP_RATIO - 1) * (slowest_decodes(first, plan) if first is not None else max(decode, decodes))
    by_tokens = {smallest: first.by_tokens[smallest]} if first is not None else {}
    for n in sizes:
        by_tokens[n] = by_tokens.get(n) or step(n, 0)
        if by_tokens[n] - decode > bound:
            break
    context = min(context, plan.max_model_len.value - max(by_tokens) - 1, room - max(by_tokens))
    at_context = {n: step(n, context) for n in by_tokens} if context >= FIRST_CONTEXT else {}
    return PrefillTimings(decode, by_tokens, f"best of {REPEATS}", context if at_context else 0, at_context, full,
                          decodes)


def slowest_decodes(timings: PrefillTimings, plan: ExecutionPlan) -> float:
    """The slowest step of decodes a column of the table serves: each count of decodes at the longest context of their
    own the table serves and the cache holds for them all."""
    longest, cache = span_starts(timings, plan.max_model_len.value)[-1], plan.kv_blocks.value * plan.block_size
    return max(decodes_step(timings, d, min(longest, cache // d))
               for d in decode_counts(timings, plan.max_num_seqs.value))
