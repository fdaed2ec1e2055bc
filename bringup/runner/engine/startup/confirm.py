"""Steps 9 and 10: the fused decode layers checked on the loaded model (decode_layers row); the draft plan's
candidates timed on the served model (or the timings given as data or by the record), and the plan confirmed from
those timings: each candidate kept only where it won, the batch limit at the knee, no compiled forward the fused
layers leave idle."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.engine.decode_timing import measure_decode
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.confirm import confirm_plan, fused_rows, without_unused_compile
from bringup.runner.plan.host_kernels import choose_decode_layers, decode_layers_not_tried
from bringup.runner.plan.plan import ExecutionPlan


def fused_decode(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its decode_layers row; the executor holding the fused decode layers where they were tried and
    compute the model here."""
    bench = start.bench
    assert bench.measured is not None and bench.executor is not None and bench.model is not None
    if bench.measured.fused_decode:
        bench.executor.fused, decode_layers = choose_decode_layers(bench.model, plan.block_size,
                                                                   plan.max_model_len.value, plan.kv_blocks.value)
    else:
        decode_layers = decode_layers_not_tried()
    return replace(plan, decode_layers=decode_layers)


def confirm(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The confirmed plan; the bench's draft (this step's input plan and weight layout) and decode timings."""
    inputs, bench = start.inputs, start.bench
    executor, measured, given = bench.executor, bench.measured, bench.given
    assert executor is not None and measured is not None and bench.model is not None
    bench.draft, bench.draft_layout = plan, bench.model.layout
    bench.timings = timings = given.decode if given else measure_decode(executor, plan, bench.free,
                                                                        not inputs.seqs_requested)
    bench.measured = replace(measured, decode=timings)
    plan = confirm_plan(plan, timings, inputs.seqs_requested)
    if given and timings is not None and executor.fused is not None:  # measured, measure_decode set them
        executor.fused.rows = fused_rows(timings)  # the steps past the switch the record's pairs won
    return without_unused_compile(plan, executor.fused is not None and executor.fused.serves_every_decode_step())
