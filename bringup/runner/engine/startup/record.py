"""Step 2, find the record: the weights checked against free memory (before any is read), and the plan `bringup tune`
recorded for this model, dtype and --quantization, when the caller neither gives timings nor refuses records; a
record that breaks the bounds its replay needs is a fallback (timing at start-up instead). The record replaces the
kernel timings (measure.py), the decode timings (confirm.py) and marks the rows it decided (mark_recorded)."""

from __future__ import annotations

from bringup.log import get_logger
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.split import load_device
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.record.bounds import record_problem
from bringup.runner.plan.record.recorded import find_record as recorded_plan
from bringup.runner.plan.record.recorded import marked, model_key

log = get_logger("runner.startup")


def find_record(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan as it was; the bench's fingerprint, key and record."""
    inputs, bench = start.inputs, start.bench
    inputs.source.check_weights(inputs.config, bench.dtype, load_device(inputs.placement, inputs.device),
                                inputs.options.force)
    bench.fingerprint = inputs.source.fingerprint()
    bench.key = model_key(inputs.source.name, bench.fingerprint, bench.quantization)
    bench.record = _usable_record(start, plan.dtype.value)
    return plan


def mark_recorded(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with each setting the replayed record decided saying so."""
    record = start.bench.record
    return plan if record is None else marked(plan, record, start.inputs.seqs_requested)


def _usable_record(start: Start, dtype: str) -> ModelPlanRecord | None:
    options, bench = start.inputs.options, start.bench
    if options.measurements is not None or not options.use_record:
        return None
    record, why = recorded_plan(bench.profile, bench.key, dtype, bench.quantization)
    problem = record_problem(bench.key, record) if record is not None else None
    if problem is not None:
        start.inputs.recorder.record("path", "tune record", wanted=f"the plan recorded for {bench.key}",
                                     instead="timing at start-up",
                                     why=f"{problem}; fix the field, or re-run `bringup tune` to record it again")
        return None
    log.info("%s%s", why, ": replayed, no timing" if record else "")
    return record
