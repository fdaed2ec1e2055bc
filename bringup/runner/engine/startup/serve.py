"""Steps 12 and 14: the hot-path ops the profile records running through the host, counted as op fallbacks and
listed in the plan (host_fallbacks row); then the executor made to follow the plan (Executor.follow: the one place
plan settings become executor state) and its compiled forward warmed up on the decode shapes."""

from __future__ import annotations

from dataclasses import replace

from bringup.backends.host import HOST_DEVICE_TYPE
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.host_fallbacks import fallbacks_choice, hot_path_fallbacks
from bringup.runner.plan.plan import ExecutionPlan, planned_ops


def host_fallbacks(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its host_fallbacks row: each hot-path op the profile records running through the host, logged
    and counted as an op fallback (an error under --strict)."""
    notes = hot_path_fallbacks(start.bench.facts, plan.dtype.value, planned_ops(start.inputs.config, plan))
    recorder = start.inputs.recorder
    for op, why in notes.items():
        recorder.record("op", op, wanted=f"{op} on {plan.device}", instead=f"{HOST_DEVICE_TYPE} through the "
                        "backend's fallback (no better verified path)", why=f"the profile records {why}")
    return replace(plan, host_fallbacks=fallbacks_choice(notes))


def follow(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan, its attention row saying how prompts behind a cached context attend; the executor running it, its
    compiled forward met with the decode shapes."""
    executor = start.bench.executor
    assert executor is not None
    executor.follow(plan)
    executor.warm_up_decode_shapes()
    attention = plan.attention
    said = (f"{attention.evidence}; a prompt behind a cached context longer than itself: "
            f"{executor.attention.context_evidence}")
    return replace(plan, attention=replace(attention, evidence=said))
