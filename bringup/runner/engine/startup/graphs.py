"""Step 16: the graphs row. Decode steps captured per batch-size bucket on the loaded model, the runner's replay
checked against the same step run eagerly, and replay timed against eager on the served model (or the timing given,
or replayed from a tune record: the capture and its replay check still run); the executor replays them only where
every check passed (plan/graphs.py says which did not)."""

from __future__ import annotations

from dataclasses import replace

from bringup.backends.registry import backend_for
from bringup.errors import StrictFallbackError, exception_line
from bringup.runner.engine.decode_timing import DecodeSteps, sweep_context, timed_pair
from bringup.runner.engine.graphs.buckets import batch_buckets, context_buckets
from bringup.runner.engine.graphs.capture import family_capture
from bringup.runner.engine.graphs.checked_capture import capture_checked
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.late_source import given_replayed_or_measured
from bringup.runner.engine.startup.split import split_runs
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.graphs import OFF, off, on, option_off, replay_check, through_host, timed
from bringup.runner.plan.graphs_evidence import replay_verdict
from bringup.runner.plan.host_fallbacks import hot_path_fallbacks
from bringup.runner.plan.plan import ExecutionPlan, planned_ops


def capture_graphs(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its graphs row; the executor replaying them where it says so."""
    refused = _refused(plan, start)
    if refused is not None:
        return replace(plan, graphs=refused)
    verified = replay_verdict(start.bench.facts, plan.dtype.value)
    if not verified.step_passed:
        why = verified.evidence if not verified.passed else f"not verified: {verified.evidence}"
        return replace(plan, graphs=off(why))
    executor, device = start.bench.executor, start.inputs.device
    assert executor is not None
    batches = batch_buckets(plan.max_num_seqs.value)
    contexts = context_buckets(plan.max_model_len.value, plan.block_size)
    try:
        graphs, difference = capture_checked(executor.model, plan.block_size, batches, contexts,
                                             family_capture(device), start.inputs.recorder)
    except StrictFallbackError:
        raise
    except Exception as exc:
        return _fell_back(plan, start, f"the runner's capture of its decode step failed: {exception_line(exc)}")
    wrong = replay_check(difference)
    if wrong is not None:
        return _fell_back(plan, start, wrong)
    step = DecodeSteps(executor, sweep_context(plan))
    pair, how = given_replayed_or_measured(start, "graph_decode", lambda: timed_pair(
        step, lambda use: setattr(executor, "graphs", graphs if use else None)))
    assert pair is not None
    faster, timing = timed(*pair)
    timing = f"{timing} ({how})"
    executor.graphs = graphs if faster else None
    if not faster:
        return replace(plan, graphs=off(timing))
    check = f"the runner's replay equals eager (relative max |difference| {difference:.2g})"
    return replace(plan, graphs=on(batches, contexts, verified.evidence, check, timing))


def _fell_back(plan: ExecutionPlan, start: Start, why: str) -> ExecutionPlan:
    """Off where the profile verified graphs at this dtype and the runner's own capture or check did not hold: a
    path fallback (WARNING, counted; --strict refuses it)."""
    start.inputs.recorder.record("path", "decode step", wanted="graph replay (verify-ops' record passed)",
                                 instead="eager", why=why)
    return replace(plan, graphs=off(why))


def _refused(plan: ExecutionPlan, start: Start) -> Choice | None:
    """The off row of a start that captures nothing: --graphs off, a layer split, no capture API, an op through
    the host."""
    if start.inputs.options.graphs == OFF:
        return option_off()
    if split_runs(start.inputs.placement) is not None:
        return off("the layers are split across devices: a captured step holds one device's work")
    device = start.inputs.device
    if backend_for(device).graph_api() is None:
        return off(f"the {device.type} backend offers no graph capture")
    notes = hot_path_fallbacks(start.bench.facts, plan.dtype.value, planned_ops(start.inputs.config, plan))
    return through_host(notes, plan.device)
