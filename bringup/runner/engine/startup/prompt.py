"""Step 17, prompt layers: the prompt_layers row. The element-wise parts of the steps the fused decode layers do not
run (prompts, mixed steps) in host kernels (host/prompt_layers.py), where they compute this model, match its modules
on a check and run a prompt under MARGIN of the modules' time: both timed here on the served plan, alternately, or
the timings given as data or replayed from a tune record (given as data without them, the kernels are not tried)."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.engine.best_of import best_of
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.late_source import given_replayed_or_measured
from bringup.runner.host import prompt_layers
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.host_kernels import prompt_flash_verdict
from bringup.runner.plan.plan import FUSED, MODULES, Choice, ExecutionPlan
from bringup.runner.plan.prompt_layers import PromptTimings, choose_prompt_layers
from bringup.runner.weights.kernels.build import HostKernelInputError, KernelUnavailable

PROMPT_TOKENS = 512  # the prompt timed (or max_model_len - 1, or what the cache holds, where less)
ROUNDS = 3  # runs of each path, the two alternated so a busy spell slows both


def fused_prompt(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    executor, model, given = start.bench.executor, start.bench.model, start.inputs.options.measurements
    assert executor is not None and model is not None
    if given is not None and given.prompt is None:
        return replace(plan, prompt_layers=Choice(MODULES, "the model's modules: fused prompt layers not tried (the "
                                                           "start's timings given as data without them)"))
    why = prompt_layers.cannot_fuse(model, plan.max_model_len.value)
    fused, flash = None, (False, "not tried")
    if why is None:
        try:
            fused = prompt_layers.FusedPrompt(model)
            flash = prompt_flash_verdict(model.dtype, model.config.num_heads,
                                         model.config.num_kv_heads, model.config.head_dim)
            fused.flash = flash[0]
            why = prompt_layers.check_on_model(fused, plan.block_size, plan.max_model_len.value,
                                               plan.kv_blocks.value)
            if why is not None and fused.flash:  # used only where the layers with it match the plan's attention too
                fused.flash, flash = False, (False, f"the layers with it differ from the modules ({why})")
                why = prompt_layers.check_on_model(fused, plan.block_size, plan.max_model_len.value,
                                                   plan.kv_blocks.value)
        except (KernelUnavailable, HostKernelInputError) as exc:
            why = str(exc)
    if why is not None or fused is None:
        return replace(plan, prompt_layers=Choice(MODULES, f"the model's modules: fused prompt layers not used: {why}"))
    timings, how = given_replayed_or_measured(start, "prompt", lambda: time_prompt(executor, fused, plan))
    if timings is None:
        return replace(plan, prompt_layers=Choice(MODULES, "the model's modules: fused prompt layers not timed (no "
                                                           "room in the KV cache for a prompt)"))
    choice = choose_prompt_layers(timings, how, flash)
    executor.prompt = fused if choice.value == FUSED else None
    return replace(plan, prompt_layers=choice)


def time_prompt(executor: Executor, fused: prompt_layers.FusedPrompt, plan: ExecutionPlan) -> PromptTimings | None:
    """One fresh prompt in the cache's first blocks (before any request holds one) through each path, ROUNDS runs
    each, alternated (after an untimed first run of each); None when the cache cannot hold one of two tokens."""
    size = plan.block_size
    tokens = min(PROMPT_TOKENS, plan.max_model_len.value - 1, plan.kv_blocks.value * size)
    if tokens < 2:
        return None
    chunk = SeqChunk([1 + i % 97 for i in range(tokens)], 0, list(range(-(-tokens // size))))
    device, running = executor.model.device, executor.prompt
    seconds: dict[bool, list[float]] = {True: [], False: []}
    try:
        for through_kernels in (True, False):  # a first run of each, untimed
            executor.prompt = fused if through_kernels else None
            executor.run_chunks([chunk])
        for _ in range(ROUNDS):
            for through_kernels in (True, False):
                executor.prompt = fused if through_kernels else None
                seconds[through_kernels].append(best_of(lambda: executor.run_chunks([chunk]), device, 1))
    finally:
        executor.prompt = running
    return PromptTimings(tokens, seconds[True], seconds[False])
