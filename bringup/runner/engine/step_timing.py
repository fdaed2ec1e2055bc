"""A device's step costs for the replicas decision and the router (plan/placement/step_cost.py), measured at the
start on the model's own layers: the FEW- and MANY-layer cuts of engine/layer_timing.py time a decode step at batch
1 and at a full batch, and a prefill of the stated load's prompt, the devices' rounds in turn; each is carried to
the whole model as the cut's time beyond its layers, plus each of the model's layers at the timed per-layer rate,
plus its embeddings and head streamed once over the device's measured bandwidth (the cuts' head is a small
vocabulary's)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.engine.layer_timing import (
    CONTEXT,
    DECODE,
    FEW,
    MANY,
    CutFloors,
    CutTimer,
    LayerTime,
    Work,
    interleaved,
    layer_time,
)
from bringup.runner.model.config import ModelConfig
from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.need import ModelNeed
from bringup.runner.plan.placement.replica_load import ReplicaLoad
from bringup.runner.plan.placement.step_cost import StepCost, measured_cost
from bringup.runner.plan.profile_facts import ProfileFacts


@dataclass(frozen=True)
class Timed:
    layer: LayerTime  # the per-layer term of a split (batch 1)
    cost: StepCost | None  # where the steps were timed


def device_timings(devices: list[DeviceFacts], config: ModelConfig, need: ModelNeed, profiles: list[ProfileFacts],
                   load: ReplicaLoad, weighed: set[str]) -> list[Timed]:
    """Each device's timed layer and, for those in `weighed`, its step costs for `load` (a decode step at its batch,
    a prefill of its prompt); None elsewhere; the devices' rounds in turn."""
    full, prefill = Work(load.requests, 1), Work(1, max(min(load.prompt_tokens, CONTEXT), 2))
    works = {d.device: (DECODE, full, prefill) if d.device in weighed else (DECODE,) for d in devices}
    timers = [CutTimer(d.device, config, d.dtype, p, works[d.device]) for d, p in zip(devices, profiles)]
    return [_carried(d, floors, need, works[d.device]) for d, floors in zip(devices, interleaved(timers))]


def _carried(facts: DeviceFacts, floors: CutFloors, need: ModelNeed, works: tuple[Work, ...]) -> Timed:
    """The per-layer term, and where the steps were timed, the cuts' floors carried to the whole model."""
    layer = layer_time(floors, facts.device, facts.dtype)
    if len(works) == 1:
        return Timed(layer, None)
    decode, full, prefill = works
    head_s = need.other_elements * facts.itemsize / (facts.gbps * 1e9)

    def whole(work: Work) -> float:
        return floors.fixed_s(work) + need.layers * floors.layer_s(work) + head_s

    how = (f"(carried to {need.layers} layers from decode steps and prefills of {FEW}- and {MANY}-layer cuts of "
           f"the model timed on {facts.device}, {facts.dtype}; {_floors(floors, works)}; "
           f"embeddings and head {head_s * 1e3:.3g} ms over {facts.gbps:.3g} GB/s)")
    return Timed(layer, measured_cost(whole(decode), whole(full), full.batch, whole(prefill), prefill.tokens, how))


def _floors(floors: CutFloors, works: tuple[Work, ...]) -> str:
    return ", ".join(f"{_said(w)} {floors.few[w] * 1e3:.3g}/{floors.many[w] * 1e3:.3g} ms" for w in works)


def _said(work: Work) -> str:
    return f"prefill of {work.tokens}" if work.tokens > 1 else f"decode at batch {work.batch}"
