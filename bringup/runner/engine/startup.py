"""Engine start-up: device → profile → plan → weights → KV cache → warm-up → decode steps timed on the served
model (or the timings `bringup tune` recorded for it, replayed) → the plan frozen, with the global fallback."""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import torch

from bringup.backends.host import HOST, HOST_DEVICE_TYPE, is_host
from bringup.backends.registry import backend_for
from bringup.backends.selection.select import select_device
from bringup.errors import BringupError, StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.profiles.store import default_profile_path, load_profile, same_device
from bringup.runner.engine.auto_quantization.held_candidates import load_held_candidates
from bringup.runner.engine.auto_quantization.measure import auto_quantization
from bringup.runner.engine.decode_timing import apply_confirmed, measure_decode, sweep_limit, sweep_room
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.quantized_activations import versus_unquantized, with_quantized_activations
from bringup.runner.engine.reconfirm import Reconfirmation, why_reconfirm
from bringup.runner.model.attention_kinds import PAGED_DECODE
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.confirm import confirm_plan, without_unused_compile
from bringup.runner.plan.host_fallbacks import fallbacks_choice, hot_path_fallbacks
from bringup.runner.plan.host_kernels import (
    choose_decode_layers,
    choose_layout,
    decode_layers_not_tried,
    with_paged_decode,
)
from bringup.runner.plan.kv_sizing import size_kv_cache
from bringup.runner.plan.measurements import StartupMeasurements, measure
from bringup.runner.plan.plan import Choice, ExecutionPlan, attention_limits, build_plan, planned_ops
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.quantize.checkpoint import checkpoint_scheme
from bringup.runner.plan.quantize.held_blocks import none_choice, origin, record_requantized
from bringup.runner.plan.quantize.scheme import AUTO, NONE, SCHEMES, auto_candidates, check_requested, requested_scheme
from bringup.runner.plan.record.bounds import beyond_this_start, record_problem
from bringup.runner.plan.record.recorded import find_record, marked, model_key, replayed
from bringup.runner.sources.directory.validate import WeightsDoNotFit
from bringup.runner.sources.model_source import ModelSource, model_source
from bringup.runner.text.chat_template import template_from_file
from bringup.runner.weights.kinds import IN_OUT, OUT_IN

Engine = TypeVar("Engine")  # the engine class start_engine builds (LLMEngine; kept generic to avoid a cycle)

log = get_logger("runner.startup")


def read_profile(path: Path | None, device: torch.device, info: Any) -> tuple[Profile | None, str]:
    """The profile if it exists and belongs to this device; otherwise None and why (a label)."""
    path = path or default_profile_path(info)
    if not Path(path).exists():
        return None, f"{path} does not exist"
    profile = load_profile(Path(path))
    current = DeviceSection.model_validate(info.to_dict())
    if profile.device is not None and not same_device(profile.device, current):
        return None, f"{path} was recorded for {profile.device.id} ({profile.device.name}), not {device}"
    return profile, str(path)


def collected(engine: Engine) -> Engine:
    """The engine, after one full garbage collection of what start-up left behind: otherwise the collector's
    young generations keep walking start-up's objects during the first decode steps (measured: a tenth of a
    SmolLM2-135M int8 decode step on a 2-core Xeon)."""
    gc.collect()
    return engine


def start_engine(cls: Callable[..., Engine], options: EngineOptions) -> Engine:
    if options.max_model_len is not None and options.max_model_len < 2:
        raise BringupError(f"--max-model-len {options.max_model_len} is too small; it must be at least 2 tokens")
    if options.max_num_seqs is not None and options.max_num_seqs < 1:
        raise BringupError(f"max_num_seqs {options.max_num_seqs} must be at least 1")
    check_requested(options.quantization)
    recorder = FallbackRecorder(strict=options.strict)
    template = None if options.chat_template is None else template_from_file(options.chat_template)
    source = model_source(options.model_dir)
    config = source.config()
    tokenizer = source.tokenizer(config, recorder)
    tokenizer.fallbacks = recorder
    if template is not None:
        tokenizer.use_chat_template(template)
        log.info("chat template: %s (--chat-template), in place of the model's", options.chat_template)
    source.check(config)  # headers, names and shapes checked before anything is timed or loaded
    selection = select_device(options.device, _profile_device(options.profile_path))
    device = selection.device
    try:
        return collected(_start_on(cls, options, source, device, selection.info, config, tokenizer, recorder))
    except WeightsDoNotFit as exc:  # refused before any weight was read: the CPU may still hold them
        if is_host(device):
            raise
        if not options.allow_cpu_fallback:
            raise WeightsDoNotFit(f"{exc} (or pass --allow-cpu-fallback to run on the CPU)") from None
        why = str(exc)
    except (BringupError, StrictFallbackError):
        raise
    except Exception as exc:
        why = exception_line(exc)
        if is_host(device):
            raise
        if not options.allow_cpu_fallback:
            raise BringupError(f"device {device} failed while starting the runner ({why}); fix the device "
                               "set-up, or pass --allow-cpu-fallback to run on the CPU") from None
    recorder.record("global", "device", wanted=str(device), instead=HOST_DEVICE_TYPE, why=why)
    fell_back = Choice(HOST_DEVICE_TYPE, f"wanted {device}: {why}; on the host instead (--allow-cpu-fallback)")
    return _start_on(cls, options, source, HOST, backend_for(HOST).device_info(0), config, tokenizer, recorder,
                     fell_back)


def _profile_device(path: Path | None) -> str | None:
    if path is None or not Path(path).exists():
        return None
    profile = load_profile(Path(path))
    return profile.device.id if profile.device else None


def _start_on(cls: Callable[..., Engine], options: EngineOptions, source: ModelSource, device: torch.device,
              info: Any, config: ModelConfig, tokenizer: Any, recorder: FallbackRecorder,
              fell_back: Choice | None = None, withdrawn: Choice | None = None) -> Engine:
    """The engine on `device`; `fell_back`: the global fallback that brought it there, shown in the plan;
    `withdrawn`: the quantization row of a start whose auto-chosen scheme lost to the unquantized plan."""
    profile, label = read_profile(options.profile_path, device, info)
    facts = ProfileFacts(profile)
    plan = build_plan(facts, label, str(device), config, options.max_num_seqs, options.max_model_len,
                      options.dtype, options.force)
    asked, quantization = plan.dtype.value, check_requested(options.quantization)
    plan = with_quantized_activations(plan, quantization, device, config, _free_before_weights(device, options),
                                      config.stored_quantization is not None, partial(
                                          build_plan, facts, label, str(device), config, options.max_num_seqs,
                                          options.max_model_len, force=options.force))
    if fell_back is not None:
        plan = replace(plan, global_fallback=fell_back, warnings=[*plan.warnings, f"global fallback: "
                                                                                  f"{fell_back.evidence}"])
    dtype = getattr(torch, plan.dtype.value)
    source.check_weights(config, dtype, device, options.force)  # size vs free memory, then values: before any read
    fingerprint = source.fingerprint()
    key = model_key(source.name, fingerprint, check_requested(options.quantization))
    record = _record(options, profile, key, plan.dtype.value, recorder)
    measured = options.measurements or (
        replayed(record, device, dtype, config, backend_for(device).memory(device.index or 0)[1]) if record
        else measure(device, dtype, config))
    given = measured if options.measurements or record else None  # timings given as data or by a record
    cannot = attention_limits(config, plan.max_model_len.value).get(PAGED_DECODE)  # the model's math, not speed
    plan = replace(plan, attention=with_paged_decode(plan.attention, *((False, cannot) if cannot else
                                                                       measured.paged_decode)))
    if options.weight_layout is None:
        layout, layout_choice = choose_layout(facts, measured.layouts, dtype, config, measured.free_bytes)
    elif options.weight_layout in (IN_OUT, OUT_IN):
        layout = WeightLayout(options.weight_layout, options.weight_layout, 0)
        layout_choice = Choice(options.weight_layout, "forced by the caller, not measured")
    else:
        raise BringupError(f"weight layout {options.weight_layout!r} is not one of {IN_OUT}, {OUT_IN}")
    weights = source.linear_weight_types()
    quantization_choice = withdrawn or none_choice(weights)
    if config.stored_quantization is not None:
        layout, layout_choice, quantization_choice = checkpoint_scheme(config.stored_quantization, quantization,
                                                                       device, layout, layout_choice)
    elif quantization in SCHEMES:
        record_requantized(quantization, weights, recorder)  # the file against the request, before the kernel
        layout, quantization_choice = requested_scheme(quantization, device, config, recorder,
                                                       origin(quantization, weights))
        layout_choice = Choice(layout.describe(), "the --quantization scheme's storage (see quantization)")
    plan = replace(plan, weight_layout=layout_choice, quantization=quantization_choice)
    model, name = source.load(config, dtype, device, layout, checked=True), source.name
    free = _free_after_weights(device, given, model.weight_bytes())
    seqs_requested = options.max_num_seqs is not None
    sweep = None if seqs_requested or options.measurements else sweep_room(plan)  # a replay sizes as tune did
    plan = replace(plan, kv_blocks=size_kv_cache(config, dtype, plan.block_size, plan.max_num_seqs.value,
                                                 plan.max_model_len.value, plan.max_num_batched_tokens.value, free,
                                                 model.weight_bytes(), sweep))
    if record is not None and not seqs_requested and not _sweep_fits(key, record, plan, recorder):
        record = given = None  # the decode steps are timed here (the layout timings stay replayed)
    model.allocate_kv_cache(plan.kv_blocks.value, plan.block_size)
    executor = Executor(model, plan, recorder)
    executor.warm_up()
    if quantization == AUTO:
        load_held_candidates(model, source, config, dtype, weights, auto_candidates(device, config)[0])
        plan = auto_quantization(executor, tokenizer, plan, weights)
        model.use_layout(model.layout)  # frees a file's blocks loaded for a scheme auto did not keep
        executor.plan = plan
    if measured.fused_decode:
        executor.fused, decode_layers = choose_decode_layers(model, plan.block_size, plan.max_model_len.value,
                                                             plan.kv_blocks.value)
    else:
        decode_layers = decode_layers_not_tried()
    plan = replace(plan, decode_layers=decode_layers)
    draft, draft_layout = plan, model.layout
    timings = given.decode if given else measure_decode(executor, plan, free, not seqs_requested)
    if options.on_measured is not None:
        options.on_measured(replace(measured, decode=timings))
    plan = confirm_plan(plan, timings, seqs_requested)
    plan = without_unused_compile(plan, executor.fused is not None and executor.fused.serves_every_decode_step())
    if record is not None:
        plan = marked(plan, record, seqs_requested)
    plan = _with_host_fallbacks(plan, facts, config, recorder)
    apply_confirmed(executor, plan)
    executor.plan = plan
    executor.warm_up_decode_shapes()
    plan, withdrawn = versus_unquantized(plan, executor, source, quantization, asked, options.measurements,
                                         record is not None)
    if withdrawn is not None:  # auto's scheme lost to the unquantized plan: start again with none, saying why
        del model, executor
        return _start_on(cls, replace(options, quantization=NONE), source, device, info, config, tokenizer, recorder,
                         fell_back, withdrawn)
    executor.plan = plan
    _log_plan(plan)
    eos = sorted(set(tokenizer.eos_token_ids) | set(config.eos_token_ids))
    reconfirmation = Reconfirmation(draft, draft_layout, why_reconfirm(timings, replayed=record is not None))
    return cls(executor=executor, tokenizer=tokenizer, plan=plan, fallbacks=recorder, model_name=name,
               eos_token_ids=eos, model_fingerprint=fingerprint, reconfirmation=reconfirmation)


def _with_host_fallbacks(plan: ExecutionPlan, facts: ProfileFacts, config: ModelConfig,
                         recorder: FallbackRecorder) -> ExecutionPlan:
    """The frozen plan's hot-path ops that the profile records running through the host: each one logged and
    counted as an op fallback (an error under --strict), and listed in the plan."""
    notes = hot_path_fallbacks(facts, plan.dtype.value, planned_ops(config, plan))
    for op, why in notes.items():
        recorder.record("op", op, wanted=f"{op} on {plan.device}", instead=f"{HOST_DEVICE_TYPE} through the "
                        "backend's fallback (no better verified path)", why=f"the profile records {why}")
    return replace(plan, host_fallbacks=fallbacks_choice(notes))


def _record(options: EngineOptions, profile: Profile | None, key: str, dtype: str, recorder: FallbackRecorder
            ) -> ModelPlanRecord | None:
    """The plan tune recorded under `key` at this dtype, unless the caller gives or wants timings; a record that
    breaks the bounds replay needs is a fallback (timing at start-up instead)."""
    if options.measurements is not None or not options.use_record:
        return None
    record, why = find_record(profile, key, dtype, check_requested(options.quantization))
    problem = record_problem(key, record) if record is not None else None
    if problem is not None:
        recorder.record("path", "tune record", wanted=f"the plan recorded for {key}", instead="timing at start-up",
                        why=f"{problem}; fix the field, or re-run `bringup tune` to record it again")
        return None
    log.info("%s%s", why, ": replayed, no timing" if record else "")
    return record


def _sweep_fits(key: str, record: ModelPlanRecord, plan: ExecutionPlan, recorder: FallbackRecorder) -> bool:
    """Whether every batch the record's sweep timed fits this start's KV cache and step budget; if not, a fallback:
    the decode steps and batch sizes are timed at this start."""
    why = beyond_this_start(key, record, sweep_limit(plan))
    if why is not None:
        recorder.record("path", "tune record", wanted=f"the batch limit recorded for {key}",
                        instead="the decode steps and batch sizes timed at this start (the layout timings replayed)",
                        why=f"{why}; re-run `bringup tune` as this start runs (memory, --max-model-len)")
    return why is None


def _free_before_weights(device: torch.device, options: EngineOptions) -> int | None:
    """Free device memory before the weights are loaded: given as data, or read from the device."""
    if options.measurements is not None:
        return options.measurements.free_bytes
    return backend_for(device).memory(device.index or 0)[1]


def _free_after_weights(device: torch.device, given: StartupMeasurements | None, weight_bytes: int) -> int | None:
    """Free device memory now that the weights are in place: read from the device, or derived from given data."""
    if given is None:
        return backend_for(device).memory(device.index or 0)[1]
    return None if given.free_bytes is None else given.free_bytes - weight_bytes


def _log_plan(plan: ExecutionPlan) -> None:
    """DEBUG (`-v`): the commands show the plan themselves (generate/serve a table, selftest --details, all a line)."""
    for setting, value, evidence in plan.rows():
        log.debug("plan %s = %s (%s)", setting, value, evidence)
