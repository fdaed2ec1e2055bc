"""A mixed step past the fused decode layers' rows timed at start-up both ways, for the mixed_steps row
(plan/mixed_steps.py): DECODES decodes and the smallest timed prompt chunk that takes the step past the kernel's rows,
as one forward and as two, alternated, with the decodes at one block of context and at a long one, after WARM_UPS
untimed rounds of all four (a first run of a shape pays for its kernels' set-up). The chunk's K/V go
to the cache's first blocks and the decodes' to its last, before any request holds one; what the context's slots hold
does not change the time."""

from __future__ import annotations

from bringup.backends.host import is_host
from bringup.runner.engine.best_of import best_of
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.cpu_share import CpuShare
from bringup.runner.plan.mixed_steps import DECODES, LONG_CONTEXT, MixedTimings
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.prefill_chunk import chunk_sizes

REPEATS = 3
WARM_UPS = 2


def why_not_timed(executor: Executor, plan: ExecutionPlan) -> str | None:
    """Why no mixed step is timed (its steps run as one forward), or None."""
    fused = executor.fused
    if fused is None:
        return "no fused decode layers in the plan: every step runs through the modules"
    if not fused.serves(decodes_timed(plan)):
        return f"the fused decode layers do not serve a step of {decodes_timed(plan)} decodes"
    if chunk_tokens(executor, plan) is None:
        return "the fused decode layers serve every step's rows"
    return None


def decodes_timed(plan: ExecutionPlan) -> int:
    return min(DECODES, plan.max_num_seqs.value)


def chunk_tokens(executor: Executor, plan: ExecutionPlan) -> int | None:
    decodes, fused = decodes_timed(plan), executor.fused
    assert fused is not None
    return next((n for n in chunk_sizes(plan.max_model_len.value) if n > 1 and not fused.serves(decodes + n)), None)


def measure_mixed(executor: Executor, plan: ExecutionPlan) -> MixedTimings | None:
    """The timings (why_not_timed(...) is None), or None when the cache cannot hold the decodes at a long context."""
    size, blocks, decodes = plan.block_size, plan.kv_blocks.value, decodes_timed(plan)
    tokens = chunk_tokens(executor, plan)
    assert tokens is not None
    chunk_blocks = -(-tokens // size)
    short = size - 1
    long = min(LONG_CONTEXT, (blocks - chunk_blocks) // decodes * size - 1, plan.max_model_len.value - 1)
    if long < 2 * size:
        return None
    per = -(-(long + 1) // size)
    tables = [list(range(blocks - (i + 1) * per, blocks - i * per)) for i in range(decodes)]
    chunk = SeqChunk([1 + i % 97 for i in range(tokens)], 0, list(range(chunk_blocks)))
    device, kept = executor.model.device, executor.split_from
    one: dict[int, list[float]] = {}
    two: dict[int, list[float]] = {}
    steps = {context: [SeqChunk([1 + i] * (context + 1), context, tables[i]) for i in range(decodes)] + [chunk]
             for context in (short, long)}
    sides = {None: one, 0: two}  # executor.split_from: one forward, two
    share = CpuShare(is_host(device))
    try:
        for _ in range(WARM_UPS):  # untimed: every shape and path met before any is timed
            for step in steps.values():
                for split in sides:
                    executor.split_from = split
                    executor.run_chunks(step)
        for _ in range(REPEATS):
            for context, step in steps.items():
                for split, seconds in sides.items():
                    executor.split_from = split
                    share.start()
                    seconds.setdefault(context, []).append(best_of(lambda s=step: executor.run_chunks(s), device, 1))
                    share.stop()
    finally:
        executor.split_from = kept
    return MixedTimings(decodes, tokens, one, two, share.share())
