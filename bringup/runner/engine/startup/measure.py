"""Step 3, measure the kernels: the start-up measurements (weight layouts, the paged decode kernel, free memory),
given as data, replayed from the record, or measured here; the attention row with the paged decode kernel where it
won and the model's math allows it."""

from __future__ import annotations

from dataclasses import replace

from bringup.backends.registry import backend_for
from bringup.profiles.attention_kinds import PAGED_DECODE
from bringup.runner.engine.attention_check import GIVEN, ruled_out, with_checked_attention
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.host_kernels import with_paged_decode
from bringup.runner.plan.measurements import measure
from bringup.runner.plan.plan import ExecutionPlan, attention_limits
from bringup.runner.plan.record.recorded import replayed


def measure_kernels(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its attention row; the bench's measurements (and `given`: when not timed here)."""
    inputs, bench = start.inputs, start.bench
    device, config, options, record = inputs.device, inputs.config, inputs.options, bench.record
    measured = options.measurements or (
        replayed(record, device, bench.dtype, config, backend_for(device).memory(device.index or 0)[1]) if record
        else measure(device, bench.dtype, config))
    bench.measured = measured
    bench.given = measured if options.measurements or record else None  # timings given as data or by a record
    given = options.measurements  # as data (tests, tune's combined runs): the check's timings, if any, are taken
    if given is None or given.attention is not None:
        attention, checked = with_checked_attention(
            plan.attention, config, bench.dtype, device,
            ruled_out(bench.facts, plan.dtype.value, config, plan.max_model_len.value),
            measured.attention if given or record else None, bench.key if record else GIVEN, plan.max_model_len.value)
        plan = replace(plan, attention=attention)
        bench.measured = measured = replace(measured, attention=checked)
    cannot = attention_limits(config, plan.max_model_len.value).get(PAGED_DECODE)  # the model's math, not speed
    return replace(plan, attention=with_paged_decode(plan.attention, *((False, cannot) if cannot else
                                                                       measured.paged_decode)))
