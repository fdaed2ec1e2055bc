"""Steps 5 to 7: load the weights in the chosen layout; size the KV cache in the memory left (a replayed record
whose batch sweep no longer fits is dropped: the decode steps are timed here); allocate it and warm up through the
executor, so that op and path fallbacks surface before anything is timed."""

from __future__ import annotations

from dataclasses import replace

from bringup.backends.registry import backend_for
from bringup.runner.engine.decode_timing import sweep_limit, sweep_room
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.free_memory import capped_free
from bringup.runner.engine.startup.split import load_device, split_loaded, split_runs
from bringup.runner.plan.kv_sizing import size_kv_cache
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.record.bounds import beyond_this_start


def load_weights(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan as it was; the bench's model, and the free device memory now that the weights are in place (read
    from the device, or derived from the measurements given)."""
    inputs, bench = start.inputs, start.bench
    assert bench.layout is not None
    runs = split_runs(inputs.placement)
    bench.model = model = inputs.source.load(inputs.config, bench.dtype, load_device(inputs.placement, inputs.device),
                                             bench.layout, checked=True)
    given = bench.given
    if runs is not None:
        bench.free = split_loaded(model, runs, inputs.options)
    elif given is None:
        bench.free = capped_free(inputs.options, inputs.device, *backend_for(inputs.device).memory(
            inputs.device.index or 0))
    else:
        bench.free = None if given.free_bytes is None else given.free_bytes - model.weight_bytes()
    return plan


def size_cache(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its kv_blocks row (room for the batch sweep when the start times one as tune did)."""
    inputs, bench = start.inputs, start.bench
    assert bench.model is not None
    sweep = None if inputs.seqs_requested or inputs.options.measurements else sweep_room(plan)
    plan = replace(plan, kv_blocks=size_kv_cache(inputs.config, bench.dtype, plan.block_size,
                                                 plan.max_num_seqs.value, plan.max_model_len.value,
                                                 plan.max_num_batched_tokens.value, bench.free,
                                                 bench.model.weight_bytes(), sweep))
    if bench.record is not None and not inputs.seqs_requested and not _sweep_fits(plan, start):
        bench.record = bench.given = None  # the decode steps are timed here (the layout timings stay replayed)
    return plan


def warm_up(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan as it was; the KV cache allocated and the bench's executor, built on the draft plan and warmed up
    (its state follows the final plan once that is known: Executor.follow)."""
    bench = start.bench
    assert bench.model is not None
    bench.model.allocate_kv_cache(plan.kv_blocks.value, plan.block_size)
    bench.executor = Executor(bench.model, plan, start.inputs.recorder)
    bench.executor.warm_up()
    return plan


def _sweep_fits(plan: ExecutionPlan, start: Start) -> bool:
    """Whether every batch the record's sweep timed fits this start's KV cache and step budget; if not, a fallback:
    the decode steps and batch sizes are timed at this start."""
    key, record = start.bench.key, start.bench.record
    assert record is not None
    why = beyond_this_start(key, record, sweep_limit(plan))
    if why is not None:
        start.inputs.recorder.record(
            "path", "tune record", wanted=f"the batch limit recorded for {key}",
            instead="the decode steps and batch sizes timed at this start (the layout timings replayed)",
            why=f"{why}; re-run `bringup tune` as this start runs (memory, --max-model-len)")
    return why is None
