"""Step 19, prefill chunk: the prefill_chunk row, from prefill and decode steps timed on the served plan, or replayed
from a tune record of the same block size (or none when the start's timings are given as data without them)."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.engine.prefill_timing import measure_prefill
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.late_source import given_replayed_or_measured
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.prefill_chunk import PrefillTimings, choose_prefill_chunk, chunk_option


def prefill_chunk(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    executor, record = start.bench.executor, start.bench.record
    assert executor is not None
    asked = chunk_option(start.inputs.options.prefill_chunk)
    if asked is not None:
        return replace(plan, prefill_chunk=asked)
    if start.inputs.options.measurements is not None:  # given as data: without prefill timings, prompts run whole
        timings, how = start.inputs.options.measurements.prefill, ""
    else:
        same_blocks = record is None or record.block_size == plan.block_size  # else its sizes are other blocks'
        same_blocks = same_blocks and (record is None or record.prefill is None or record.prefill.with_decode)
        timings, how = given_replayed_or_measured(start, "prefill", lambda: measure_prefill(executor, plan),
                                                  replayable=same_blocks)
        timings = within(timings, plan)
    chosen = choose_prefill_chunk(timings, plan.max_model_len.value, plan.max_num_seqs.value)
    return replace(plan, prefill_chunk=replace(chosen, evidence=f"{chosen.evidence}; {how}") if how else chosen)


def within(timings: PrefillTimings | None, plan: ExecutionPlan) -> PrefillTimings | None:
    """The timings of chunks this plan can run (a record's may be of a longer context or a larger cache)."""
    if timings is None:
        return None
    room = min(plan.max_model_len.value, plan.kv_blocks.value * plan.block_size)
    by_tokens = {n: s for n, s in timings.by_tokens.items() if n < room}
    if not by_tokens:
        return None
    long = timings.context + max(by_tokens, default=0) < room
    return replace(timings, by_tokens=by_tokens, context=timings.context if long else 0,
                   at_context={n: s for n, s in timings.at_context.items() if n in by_tokens} if long else {})
