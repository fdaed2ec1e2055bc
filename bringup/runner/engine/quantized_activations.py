"""Start-up's side of plan/quantize/activations.py: the draft plan rebuilt with float32 activations for an int8 / int4
scheme (or the requested dtype kept, saying why); and, once the plan is confirmed, its decode steps timed in turn
against the unquantized plan's, on a second copy of the model loaded plain in the requested dtype and freed after."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import replace

import torch

from bringup.backends.host import is_host
from bringup.backends.registry import backend_for
from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.runner.engine.decode_timing import ROUNDS, STEPS, DecodeSteps, sweep_context
from bringup.runner.engine.executor import Executor
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.model.families import hf_tensor_shapes
from bringup.runner.model.kv_cache import bytes_per_block
from bringup.runner.plan.cpu_share import CpuShare
from bringup.runner.plan.host_kernels import choose_decode_layers, every_step_attention, panels_why_not
from bringup.runner.plan.kv_sizing import activation_estimate
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.noise import floor_noise
from bringup.runner.plan.plan import Choice, ExecutionPlan
from bringup.runner.plan.quantize.activations import (
    FLOAT32,
    Comparison,
    applies,
    auto_withdrawn,
    compared,
    float32_why_not,
    in_float32,
    kept_requested,
    room_why_not,
)
from bringup.runner.plan.quantize.scheme import AUTO, SCHEMES, scheme_why_not
from bringup.runner.sources.model_source import ModelSource
from bringup.runner.weights.kernels import quantized as quantized_kernel
from bringup.runner.weights.kinds import OUT_IN, PANELS

log = get_logger("runner.startup")

SERVED, MODULES_SIDE, FUSED_SIDE = "served", "F.linear, the modules", "fused decode layers on panels"
ROOM = 3  # free memory must hold this many copies of the unquantized weights (two are loaded: F.linear's, panels)


def with_quantized_activations(plan: ExecutionPlan, scheme: str, device: torch.device, config: ModelConfig,
                               free_bytes: int | None, pre_quantized: bool,
                               rebuild: Callable[[str], ExecutionPlan]) -> ExecutionPlan:
    """The draft plan, rebuilt at float32 (`rebuild`: build_plan at a dtype) when an int8 / int4 scheme's products
    are better served with float32 activations; with the requested dtype's row saying why not, where they cannot."""
    requested = plan.dtype
    if not applies(scheme, requested.value, is_host(device), pre_quantized) or scheme_why_not(scheme, device, config):
        return plan  # nothing to decide, or the scheme is refused in one line later
    limit = plan.max_model_len.value
    room = room_why_not(free_bytes, float_bytes(config, torch.float32),
                        one_sequence_bytes(config, plan, torch.float32), limit)
    why = float32_why_not(scheme, quantized_kernel.check(device, scheme), room)
    if why is None:
        try:
            rebuilt = _quietly(rebuild, FLOAT32)
        except BringupError as exc:
            why = f"the profile does not let float32 run here ({exc})"
    if why is not None:
        choice = kept_requested(requested, scheme, why)
        log.info("plan dtype %s: float32 activations for the %s products not used: %s", requested.value, scheme, why)
        return replace(plan, dtype=choice)
    low = getattr(torch, requested.value)
    per_token = (bytes_per_block(config, 1, low), bytes_per_block(config, 1, torch.float32))
    extra = float_parts_bytes(config, torch.float32) - float_parts_bytes(config, low)
    log.info("plan dtype float32 instead of %s: float32 activations for the %s products (the dtype row says why "
             "and what it costs)", requested.value, scheme)
    return replace(rebuilt, dtype=in_float32(requested, scheme, per_token, extra))


def _quietly(rebuild: Callable[[str], ExecutionPlan], dtype: str) -> ExecutionPlan:
    """The plan rebuilt at `dtype` without logging again the warnings the draft logged (no profile, ...)."""
    plan_log = get_logger("runner.plan")
    was, plan_log.disabled = plan_log.disabled, True
    try:
        return rebuild(dtype)
    finally:
        plan_log.disabled = was


def versus_unquantized(plan: ExecutionPlan, executor: Executor, source: ModelSource, scheme: str, asked: str,
                       given: StartupMeasurements | None, replayed: bool) -> tuple[ExecutionPlan, Choice | None]:
    """The confirmed plan with its quantization row comparing the served plan's decode steps with the unquantized
    plan's in the `asked` dtype (timed here, given as data, or why not measured); a WARNING, and a plan warning,
    when a requested scheme was slower. With `auto`: the row to serve `none` with instead, when the scheme it chose
    did not beat the unquantized plan (None otherwise)."""
    chosen = plan.quantization.value
    if chosen not in SCHEMES or scheme not in (chosen, AUTO):
        return plan, None  # nothing quantized, or a checkpoint's own scheme under another request
    comparison, why = None, None
    if executor.model.config.stored_quantization is not None:
        why = "the checkpoint is stored quantized: it has no unquantized weights to compare with"
    elif given is not None:
        comparison, why = given.unquantized, "timings given as data"
    elif replayed:
        why = "the plan recorded by tune is replayed, timing nothing"
    else:
        comparison, why = time_against_unquantized(executor, source, asked)
    row, warning = compared(plan.quantization, comparison, why, plan.dtype.value)
    if scheme == AUTO:
        withdrawn = auto_withdrawn(row, comparison)
        if withdrawn is not None:
            log.info("%s: starting again without it", withdrawn.evidence)
        return replace(plan, quantization=row), withdrawn
    if warning is None:
        return replace(plan, quantization=row), None
    log.warning("%s", warning)
    return replace(plan, quantization=row, warnings=[*plan.warnings, warning]), None


def time_against_unquantized(executor: Executor, source: ModelSource, dtype_name: str
                             ) -> tuple[Comparison | None, str | None]:
    """The served plan's decode steps and the unquantized plan's, timed in turn (its fastest of F.linear and the
    modules, and the fused decode layers on panels where they compute the model here), or why not timed."""
    model, dtype = executor.model, getattr(torch, dtype_name)
    free = backend_for(model.device).memory(model.device.index or 0)[1]
    copy = float_bytes(model.config, dtype)
    if free is None or free < ROOM * copy:
        return None, (f"no room for an unquantized {dtype_name} copy of the model: {ROOM} x {copy / 2**20:.0f} MiB "
                      "wanted, " + ("free memory unknown" if free is None else f"{free / 2**20:.0f} MiB free"))
    share, context = CpuShare(is_host(model.device)), sweep_context(executor.plan)
    floors = _timed_sides(executor, source, dtype, share)
    gc.collect()  # the unquantized copy, its cache and its fused layers' block are gone
    best = min((name for name in floors if name != SERVED), key=lambda name: floors[name][0])
    how = (f"fastest of {ROUNDS} rounds of up to {STEPS} decode steps each, the sides timed in turn, from {context} "
           f"tokens of context, batch 1; the unquantized side eager, the fastest of {', '.join(list(floors)[1:])}")
    return Comparison(floors[SERVED][0], floors[best][0], max(floors[SERVED][1], floors[best][1]),
                      f"{dtype_name} ({best})", how, share.share()), None


def _timed_sides(executor: Executor, source: ModelSource, dtype: torch.dtype, share: CpuShare
                 ) -> dict[str, tuple[float, float]]:
    """(floor, noise) per side: the served plan, and the model loaded plain in `dtype` on each path it may take."""
    model, plan, context = executor.model, executor.plan, sweep_context(executor.plan)
    plain = source.load(model.config, dtype, model.device, WeightLayout(OUT_IN, OUT_IN, 0), checked=True)
    blocks = 2 * -(-(context + STEPS + 2) // plan.block_size)  # the timed sequence's, and room for the fused check
    plain.allocate_kv_cache(blocks, plan.block_size)
    attention = plan.attention.value if dtype == model.dtype else every_step_attention(plan.attention.value)
    plain_plan = replace(plan, dtype=Choice(str(dtype).removeprefix("torch."), "the unquantized plan"),
                         compiled=Choice(None, "eager"), attention=Choice(attention, "the served plan's"),
                         kv_blocks=Choice(blocks, "its own"))
    plain_executor = Executor(plain, plain_plan, FallbackRecorder())  # its faults are not the served plan's
    fused = _plain_fused(plain, plan, dtype, blocks)
    served, steps = DecodeSteps(executor, context, share), DecodeSteps(plain_executor, context, share)
    layouts = {MODULES_SIDE: WeightLayout(OUT_IN, OUT_IN, 0), FUSED_SIDE: WeightLayout(PANELS, PANELS, 0)}

    def side(name: str) -> Callable[[], float]:
        def seconds() -> float:
            plain_executor.fused, plain.layout = (fused if name == FUSED_SIDE else None), layouts[name]
            return steps.seconds(1)
        return seconds

    return in_turn({SERVED: lambda: served.seconds(1), MODULES_SIDE: side(MODULES_SIDE),
                    **({FUSED_SIDE: side(FUSED_SIDE)} if fused is not None else {})})


def in_turn(sides: dict[str, Callable[[], float]], rounds: int = ROUNDS) -> dict[str, tuple[float, float]]:
    """(floor, floor noise) of each side's seconds, the sides timed one after another, `rounds` times over."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(rounds):
        for name, seconds in sides.items():
            times[name].append(seconds())
    return {name: (min(t), floor_noise(t)) for name, t in times.items()}


def _plain_fused(plain, plan: ExecutionPlan, dtype: torch.dtype, blocks: int):  # type: ignore[no-untyped-def]
    """The fused decode layers on a panels copy of the plain model's weights, where they compute it here; else None
    (and no panels copy kept)."""
    if panels_why_not(plain.device, dtype, plain.config) is not None:
        return None
    plain.add_kind(PANELS, OUT_IN)
    plain.layout = WeightLayout(PANELS, PANELS, 0)
    fused, _ = choose_decode_layers(plain, plan.block_size, plan.max_model_len.value, blocks)
    if fused is None:
        plain.use_layout(WeightLayout(OUT_IN, OUT_IN, 0))
    return fused


def float_bytes(config: ModelConfig, dtype: torch.dtype) -> int:
    """The checkpoint's tensors held in `dtype` (the loader's size check)."""
    return sum(math.prod(s) for s in hf_tensor_shapes(config).values() if s is not None) * dtype.itemsize


def float_parts_bytes(config: ModelConfig, dtype: torch.dtype) -> int:
    """Bytes of what stays in the plan dtype beside quantized linear weights: the embedding and the rope tables."""
    c = config
    return (c.vocab_size * c.hidden_size + 2 * c.max_position_embeddings * (c.rotary_dim // 2)) * dtype.itemsize


def one_sequence_bytes(config: ModelConfig, plan: ExecutionPlan, dtype: torch.dtype) -> int:
    """One full-context sequence's KV cache and the largest step's activations in `dtype` (kv_sizing's estimate)."""
    blocks = -(-plan.max_model_len.value // plan.block_size)
    return (blocks * bytes_per_block(config, plan.block_size, dtype)
            + activation_estimate(config, plan.max_num_batched_tokens.value, plan.max_model_len.value, dtype))
