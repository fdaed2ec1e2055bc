"""Step 1, derive: the draft plan from the profile (this device's, or none), the model's config and the options;
float32 activations where an int8 / int4 scheme's products want them; the global fallback that brought the start
to this device, if one did."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from bringup.backends.registry import backend_for
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.store import default_profile_path, load_profile, same_device
from bringup.runner.engine.quantized_activations import with_quantized_activations
from bringup.runner.engine.startup.context import Start
from bringup.runner.engine.startup.free_memory import capped_free
from bringup.runner.engine.startup.split import split_runs
from bringup.runner.plan.plan import Choice, ExecutionPlan, build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.quantize.scheme import check_requested


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


def derive(start: Start) -> ExecutionPlan:
    """The draft plan. Fills in the bench's profile, facts, checked --quantization, asked dtype and plan dtype."""
    inputs, bench, options, config = start.inputs, start.bench, start.inputs.options, start.inputs.config
    device = inputs.device
    bench.profile, label = read_profile(options.profile_path, device, inputs.info)
    bench.facts = facts = ProfileFacts(bench.profile)
    plan = build_plan(facts, label, str(device), config, options.max_num_seqs, options.max_model_len,
                      options.dtype, options.force)
    bench.asked, bench.quantization = plan.dtype.value, check_requested(options.quantization)
    plan = with_quantized_activations(plan, bench.quantization, device, config, _free_before_weights(start),
                                      config.stored_quantization is not None, partial(
                                          build_plan, facts, label, str(device), config, options.max_num_seqs,
                                          options.max_model_len, force=options.force))
    if inputs.placement is not None:
        plan = replace(plan, placement=inputs.placement)
    if split_runs(inputs.placement) is not None:
        plan = replace(plan, compiled=Choice(None, "eager: the layers are split across devices"))
    if inputs.fell_back is not None:
        plan = replace(plan, global_fallback=inputs.fell_back,
                       warnings=[*plan.warnings, f"global fallback: {inputs.fell_back.evidence}"])
    bench.dtype = getattr(torch, plan.dtype.value)
    return plan


def _free_before_weights(start: Start) -> int | None:
    """Free device memory before the weights are loaded: given as data, or read from the device."""
    device, given = start.inputs.device, start.inputs.options.measurements
    if given is not None:
        return given.free_bytes
    return capped_free(start.inputs.options, device, *backend_for(device).memory(device.index or 0))
