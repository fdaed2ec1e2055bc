"""The start-up pipeline: the draft plan derived, then each step in STEPS in this order, each taking the plan and
returning a new one with its rows' evidence (docs/runner.md, "The start-up pipeline"); the engine serves the last.
A new plan setting is one step here and one field on the plan."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from bringup.log import get_logger
from bringup.runner.engine.reconfirm import Reconfirmation, why_reconfirm
from bringup.runner.engine.startup.chunking import prefill_chunk
from bringup.runner.engine.startup.confirm import confirm, fused_decode
from bringup.runner.engine.startup.context import Start, StartInputs
from bringup.runner.engine.startup.derive import derive
from bringup.runner.engine.startup.graphs import capture_graphs
from bringup.runner.engine.startup.load import load_weights, size_cache, warm_up
from bringup.runner.engine.startup.measure import measure_kernels
from bringup.runner.engine.startup.mixed import mixed_steps
from bringup.runner.engine.startup.prefix import prefix_caching
from bringup.runner.engine.startup.prompt import fused_prompt
from bringup.runner.engine.startup.quantize import auto_quantize, compare_unquantized
from bringup.runner.engine.startup.record import find_record, mark_recorded
from bringup.runner.engine.startup.serve import follow, host_fallbacks
from bringup.runner.engine.startup.weights import choose_weights
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.plan.quantize.scheme import NONE

Engine = TypeVar("Engine")
Step = Callable[[ExecutionPlan, Start], ExecutionPlan]

log = get_logger("runner.startup")

STEPS: tuple[Step, ...] = (
    find_record,  # the weights checked to fit; the plan tune recorded, to replay
    measure_kernels,  # layouts and paged decode: given, replayed or measured; the attention row
    choose_weights,  # weight_layout and quantization rows
    load_weights,  # the model in that layout; the memory left
    size_cache,  # kv_blocks row (a record whose sweep no longer fits is dropped)
    warm_up,  # the KV cache, the executor on the draft plan, fallbacks surfaced
    auto_quantize,  # --quantization auto: quantization and weight_layout rows, measured on the model
    fused_decode,  # decode_layers row
    confirm,  # candidates timed (or given, or replayed): compiled, attention, layout, max_num_seqs, ... rows
    mark_recorded,  # each row a replayed record decided says so
    host_fallbacks,  # host_fallbacks row, each counted
    prefix_caching,  # prefix_caching row, as the options ask
    follow,  # the executor runs the plan
    compare_unquantized,  # quantization row against the unquantized plan (auto's choice may be withdrawn)
    capture_graphs,  # graphs row: decode steps captured per batch bucket, checked against eager, timed
    fused_prompt,  # prompt_layers row: a prompt timed through host kernels and through the modules
    mixed_steps,  # mixed_steps row: a step past the fused decode layers' rows timed as one forward and as two
    prefill_chunk,  # prefill_chunk row: prefill and decode steps timed on the served plan
)


def run_steps(start: Start) -> ExecutionPlan:
    plan = derive(start)
    for step in STEPS:
        plan = step(plan, start)
        if start.bench.withdrawn is not None:
            return plan  # auto's scheme lost: the pass is dropped, and the steps run again with none
    on_measured = start.inputs.options.on_measured
    if on_measured is not None and start.bench.measured is not None:
        on_measured(start.bench.measured)  # what the steps timed (or were given), as tune collects it
    return plan


def start_on(cls: Callable[..., Engine], inputs: StartInputs) -> Engine:
    """The engine on `inputs.device`, serving the pipeline's plan; when auto's scheme lost to the unquantized plan,
    the steps run a second time with none, and the quantization row says why."""
    start = Start(inputs)
    plan = run_steps(start)
    withdrawn = start.bench.withdrawn
    if withdrawn is not None:
        start.bench = None  # type: ignore[assignment]  # the first pass's model and executor go before the second
        options = replace(inputs.options, quantization=NONE)
        start = Start(replace(inputs, options=options, withdrawn=withdrawn))
        plan = run_steps(start)
    return _engine(cls, start, plan)


def _engine(cls: Callable[..., Engine], start: Start, plan: ExecutionPlan) -> Engine:
    inputs, bench = start.inputs, start.bench
    assert bench.executor is not None and bench.draft is not None and bench.draft_layout is not None
    bench.executor.plan = plan
    for setting, value, evidence in plan.rows():  # DEBUG (`-v`): the commands show the plan themselves
        log.debug("plan %s = %s (%s)", setting, value, evidence)
    eos = sorted(set(inputs.tokenizer.eos_token_ids) | set(inputs.config.eos_token_ids))
    reconfirmation = Reconfirmation(bench.draft, bench.draft_layout,
                                    why_reconfirm(bench.timings, replayed=bench.record is not None))
    return cls(executor=bench.executor, tokenizer=inputs.tokenizer, plan=plan, fallbacks=inputs.recorder,
               model_name=inputs.source.name, eos_token_ids=eos, model_fingerprint=bench.fingerprint,
               reconfirmation=reconfirmation)
