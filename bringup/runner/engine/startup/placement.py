"""Several devices named (--device emu:0,emu:1, or a family): each device's profile read, the placement planned
from them (plan/placement/), and the start goes on where the plan puts the model. A device without a profile is
refused with the command that records one: the planner never guesses a device's speed or memory."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch

from bringup.backends.selection.device_set import device_set
from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.profiles.schema import Profile
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.startup.derive import read_profile
from bringup.runner.engine.step_timing import device_timings
from bringup.runner.model.config import ModelConfig
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.placement.cost import held_bytes, usable_bytes
from bringup.runner.plan.placement.facts import DeviceFacts, UnplaceableDevice, device_facts
from bringup.runner.plan.placement.given import memory_caps, placement_mode, split_proportions
from bringup.runner.plan.placement.layer_term import with_layer_time
from bringup.runner.plan.placement.need import ModelNeed, model_need
from bringup.runner.plan.placement.placement import AUTO, LAYER_SPLIT, REPLICAS, SINGLE, Placement
from bringup.runner.plan.placement.planner import NoPlacement, plan_placement
from bringup.runner.plan.placement.replica_load import ReplicaLoad, stated_load
from bringup.runner.plan.placement.split import SplitRefused
from bringup.runner.plan.placement.split_dtype import SplitDtype, common_dtype, verified_dtypes
from bringup.runner.plan.plan import choose_max_model_len
from bringup.runner.plan.profile_facts import ProfileFacts

log = get_logger("runner.placement")
SPLIT_LAYOUT = "out_in"


@dataclass(frozen=True)
class Placed:
    device: torch.device  # where the start goes on (the single member)
    info: Any
    choice: Choice  # the plan's placement row
    placement: Placement
    options: EngineOptions  # a split serves one weight layout (the plan counted one copy of each weight)


def place(options: EngineOptions, config: ModelConfig) -> Placed | None:
    """The planned placement when --device names several devices; None when it names one."""
    infos = device_set(options.device)
    if infos is None:
        if options.layer_split is not None:
            raise BringupError("--layer-split splits the layers across the devices --device names: name several "
                               "(e.g. --device emu:0,emu:1), one proportion each")
        if (options.placement or "auto") != "auto":
            raise BringupError(f"--placement {options.placement} places the model on the devices --device names: "
                               "name several (e.g. --device emu:0,emu:1), or leave --placement out")
        return None
    if options.profile_path is not None:
        raise BringupError("--profile names one device's profile; with several devices each is read from "
                           "profiles/<device>.yaml under the current folder: run from the folder holding them")
    profiles = [_profile(info) for info in infos]
    placement, facts = _planned(options, config, infos, profiles)
    dtypes = {f.device: f.dtype for f in facts if any(m.device == f.device for m in placement.members)}
    if placement.mode == LAYER_SPLIT and len(set(dtypes.values())) > 1:
        split = _split_dtype(placement, dtypes, dict(zip([i.id for i in infos], profiles)))
        log.info("placement: %s", split.evidence)
        options = replace(options, dtype=split.dtype)
        placement, facts = _planned(options, config, infos, profiles)  # weighed again in that dtype
        placement = replace(placement, evidence=f"{placement.evidence}; {split.evidence}")
    _log(placement)
    chosen = next(info for info in infos if info.id == placement.members[0].device)
    if placement.mode != SINGLE and options.weight_layout is None:
        options = replace(options, weight_layout=SPLIT_LAYOUT)  # one copy of each weight, as the plan counted
    return Placed(torch.device(chosen.id), chosen, Choice(placement.as_value(), placement.evidence), placement,
                  options)


def _planned(options: EngineOptions, config: ModelConfig, infos: list[Any],
             profiles: list[Profile]) -> tuple[Placement, list[DeviceFacts]]:
    """The placement planned from each device's profile and what start-up times on it; each device's facts."""
    try:
        caps, proportions = memory_caps(options.device_memory), split_proportions(options.layer_split)
        mode = placement_mode(options.placement)
        facts = [device_facts(info.id, p, caps.get(info.id), options.dtype) for info, p in zip(infos, profiles)]
        need = model_need(config, choose_max_model_len(config, options.max_model_len).value)
        load = stated_load(need.context_tokens, options.max_num_seqs)
        if proportions is None:  # the planner weighs the devices: each one's layer (and steps) timed on it
            facts = _timed(facts, profiles, need, config, load, _weighs_replicas(facts, need, mode))
        return plan_placement(facts, need, proportions, mode, load), facts
    except (ValueError, UnplaceableDevice, NoPlacement, SplitRefused) as exc:
        raise BringupError(str(exc)) from None


def _split_dtype(placement: Placement, dtypes: dict[str, str], profiles: dict[str, Profile]) -> SplitDtype:
    """A dtype every member of the split verified (the member with the most layers' choice first)."""
    members = sorted(placement.members, key=lambda m: m.first - m.last)
    return common_dtype({m.device: dtypes[m.device] for m in members},
                        {m.device: verified_dtypes(ProfileFacts(profiles[m.device])) for m in members})


def _profile(info: Any) -> Profile:
    profile, label = read_profile(None, torch.device(info.id), info)
    if profile is None:
        raise BringupError(f"{info.id} has no profile ({label}): run `bringup all --device {info.id}` first; the "
                           "placement is planned from each device's measured profile, never guessed")
    return profile


def _weighs_replicas(facts: list[DeviceFacts], need: ModelNeed, mode: str) -> set[str]:
    """The devices whose step costs the replicas decision needs: each that holds the whole model, where two or more
    do and the mode lets the planner choose replicas."""
    holding = {f.device for f in facts if held_bytes(f, need, 0, need.layers - 1, 1) <= usable_bytes(f)}
    return holding if mode in (AUTO, REPLICAS) and len(holding) > 1 else set()


def _timed(facts: list[DeviceFacts], profiles: list[Profile], need: ModelNeed, config: ModelConfig,
           load: ReplicaLoad, replicas: set[str]) -> list[DeviceFacts]:
    """`facts` with each device's measured per-layer term (engine/layer_timing.py): a layer of the model timed on
    it; and on the devices in `replicas`, their step costs for the replicas decision (engine/step_timing.py); the
    devices' rounds in turn."""
    timings = device_timings(facts, config, need, [ProfileFacts(p) for p in profiles], load, replicas)
    out = []
    for f, timed in zip(facts, timings):
        log.info("placement: %s: %s", f.device, timed.layer.evidence)
        with_term = with_layer_time(f, need, timed.layer.seconds, timed.layer.evidence)
        if timed.cost is not None:
            log.info("placement: %s: step costs: %s", f.device, timed.cost.evidence)
        out.append(replace(with_term, step_cost=timed.cost))
    return out


def _log(placement: Placement) -> None:
    log.info("placement %s: %s", placement.mode, placement.evidence)
    for device, why in placement.left_out:
        log.info("placement: %s left out: %s", device, why)
