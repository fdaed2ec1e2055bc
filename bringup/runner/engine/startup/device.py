"""The start's device: the options checked, the model's source read and checked, the device selected; the engine
started there (pipeline.py), or on the host after a failure when --allow-cpu-fallback says so (the global
fallback, shown in the plan)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bringup.backends.host import HOST, HOST_DEVICE_TYPE, is_host
from bringup.backends.registry import backend_for
from bringup.backends.selection.select import select_device
from bringup.errors import BringupError, StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.profiles.store import load_profile
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.startup.context import StartInputs
from bringup.runner.engine.startup.pipeline import start_on
from bringup.runner.engine.startup.placement import place
from bringup.runner.engine.startup.replicas import runs_replicas, start_replicas
from bringup.runner.plan.graphs import check_graphs_option
from bringup.runner.plan.plan import Choice
from bringup.runner.plan.prefill_chunk import check_prefill_chunk_option
from bringup.runner.plan.quantize.scheme import check_requested
from bringup.runner.sources.directory.validate import WeightsDoNotFit
from bringup.runner.sources.model_source import model_source
from bringup.runner.text.chat_template import template_from_file

Engine = TypeVar("Engine")  # the engine class start_engine builds (LLMEngine; kept generic to avoid a cycle)

log = get_logger("runner.startup")


def collected(engine: Engine) -> Engine:
    """The engine, after one full garbage collection of what start-up left behind: otherwise the collector's
    young generations keep walking start-up's objects during the first decode steps (measured: a tenth of a
    SmolLM2-135M int8 decode step on a 2-core Xeon)."""
    gc.collect()
    return engine


def start_engine(cls: Callable[..., Engine], options: EngineOptions) -> Engine:
    inputs = _checked_inputs(options)
    if runs_replicas(inputs.placement):
        return collected(start_replicas(start_on, cls, inputs))
    device = inputs.device
    try:
        return collected(start_on(cls, inputs))
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
    inputs.recorder.record("global", "device", wanted=str(device), instead=HOST_DEVICE_TYPE, why=why)
    fell_back = Choice(HOST_DEVICE_TYPE, f"wanted {device}: {why}; on the host instead (--allow-cpu-fallback)")
    on_host = StartInputs(options, inputs.source, HOST, backend_for(HOST).device_info(0), inputs.config,
                          inputs.tokenizer, inputs.recorder, fell_back, placement=inputs.placement)
    return start_on(cls, on_host)


def _checked_inputs(options: EngineOptions) -> StartInputs:
    """The options checked, the model's config, tokenizer and files read and checked, and the device selected."""
    if options.max_model_len is not None and options.max_model_len < 2:
        raise BringupError(f"--max-model-len {options.max_model_len} is too small; it must be at least 2 tokens")
    if options.max_num_seqs is not None and options.max_num_seqs < 1:
        raise BringupError(f"max_num_seqs {options.max_num_seqs} must be at least 1")
    check_requested(options.quantization)
    for wrong in (check_graphs_option(options.graphs), check_prefill_chunk_option(options.prefill_chunk)):
        if wrong is not None:
            raise BringupError(wrong)
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
    placed = place(options, config)
    if placed is not None:
        return StartInputs(placed.options, source, placed.device, placed.info, config, tokenizer, recorder,
                           placement=placed.choice)
    selection = select_device(options.device, _profile_device(options.profile_path))
    return StartInputs(options, source, selection.device, selection.info, config, tokenizer, recorder)


def _profile_device(path: Path | None) -> str | None:
    if path is None or not Path(path).exists():
        return None
    profile = load_profile(Path(path))
    return profile.device.id if profile.device else None
