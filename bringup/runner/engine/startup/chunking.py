"""Step 16, prefill chunk: the prefill_chunk row, from prefill and decode steps timed on the served plan (or none when
the start's timings are given as data without them)."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.engine.prefill_timing import measure_prefill
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.prefill_chunk import choose_prefill_chunk


def prefill_chunk(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    given = start.inputs.options.measurements
    executor = start.bench.executor
    assert executor is not None
    timings = given.prefill if given is not None else measure_prefill(executor, plan)
    return replace(plan, prefill_chunk=choose_prefill_chunk(timings, plan.block_size))
