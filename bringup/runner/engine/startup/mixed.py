"""Step 18, mixed steps: the mixed_steps row, from a step past the fused decode layers' rows timed as one forward and
as two on the served plan (engine/mixed_timing.py), given as data or replayed from a tune record (given as data
without them, steps run as one forward)."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.engine.mixed_timing import measure_mixed, why_not_timed
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.late_source import given_replayed_or_measured
from bringup.runner.plan.mixed_steps import choose_mixed_steps
from bringup.runner.plan.plan import ExecutionPlan


def mixed_steps(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    executor, given = start.bench.executor, start.inputs.options.measurements
    assert executor is not None
    if (why := why_not_timed(executor, plan)) is not None:
        choice = choose_mixed_steps(None, "", why)
    elif given is not None and given.mixed is None:
        choice = choose_mixed_steps(None, "", "the start's timings given as data without them")
    else:
        timings, how = given_replayed_or_measured(start, "mixed", lambda: measure_mixed(executor, plan))
        choice = choose_mixed_steps(timings, how, "no room in the KV cache for the decodes at a long context")
    executor.split_from = choice.value
    return replace(plan, mixed_steps=choice)
