"""The placement planner: the fastest device alone when it holds the model; otherwise the layers split to minimise
the time per token under each device's memory cap (measured bandwidth, not memory alone) -- also where only a slower
device holds the model and the split predicts clearly faster; or the proportions an expert gave (--layer-split).
Fed only by DeviceFacts and the model's need."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.plan.placement.cost import held_bytes, mib, seconds_per_token, usable_bytes
from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.need import ModelNeed
from bringup.runner.plan.placement.placement import AUTO, LAYER_SPLIT, REPLICAS, SINGLE, Member, Placement
from bringup.runner.plan.placement.replica_load import ReplicaLoad, stated_load
from bringup.runner.plan.placement.replicas import ReplicaVerdict, judge_replicas, replica_placement
from bringup.runner.plan.placement.split import fastest_split, given_split, memory_proportional_split

# a split is chosen over one device that holds the model only when it predicts under this share of its time: the
# crossings between devices are not in the prediction
SPLIT_MARGIN = 0.9


class NoPlacement(ValueError):
    """No placement holds the model on these devices; the message says what each can hold."""


def plan_placement(devices: list[DeviceFacts], need: ModelNeed, proportions: list[float] | None = None,
                   mode: str = AUTO, load: ReplicaLoad | None = None) -> Placement:
    """The placement `mode` asks for (--placement; auto: the planner's choice); `load`: the load replicas are
    weighed for (replica_load.py; by default its stated load in the model's context)."""
    if proportions is not None:
        return given_split(devices, need, proportions)
    whole = {d.device: _whole(d, need) for d in devices}
    fitting = [d for d in devices if whole[d.device].need_bytes <= usable_bytes(d)]
    if mode == REPLICAS and len(fitting) < 2:
        raise NoPlacement(f"--placement replicas needs two devices that each hold the model; "
                          f"{len(fitting)} of {len(devices)} do: {_holds(devices, whole)}")
    load = load or stated_load(need.context_tokens, None)
    verdict = judge_replicas(fitting, load) if mode in (AUTO, REPLICAS) and len(fitting) > 1 else None
    if verdict is not None and (mode == REPLICAS or verdict.pays):
        return replica_placement(fitting, whole, devices, verdict)
    split = fastest_split(devices, need) if mode != SINGLE else None
    if mode == LAYER_SPLIT and split is None:
        raise NoPlacement(f"--placement split: no split of the layers across these devices holds the model "
                          f"({_holds(devices, whole)})")
    if mode == LAYER_SPLIT and len(split.members) == 1:
        raise NoPlacement(f"--placement split: the fastest split puts every layer on {split.members[0].device}, "
                          "which holds the model alone; give the proportions with --layer-split P1,P2,...")
    if mode == LAYER_SPLIT:
        return split
    if mode == SINGLE and not fitting:
        raise NoPlacement(f"--placement single: no device holds the model alone ({_holds(devices, whole)})")
    if fitting:
        best = min(fitting, key=lambda d: whole[d.device].seconds_per_token)
        alone = whole[best.device].seconds_per_token
        if split is None or len(split.members) == 1 or split.seconds_per_token > SPLIT_MARGIN * alone:
            return _single(best, devices, whole, verdict)
        return replace(split, evidence=f"{split.evidence}; {split.seconds_per_token * 1e3:.3g} ms/token predicted "
                                       f"against {alone * 1e3:.3g} on {best.device} alone, the fastest that holds it")
    if split is None:
        held = "; ".join(f"{d.device} {mib(usable_bytes(d))} of {mib(d.memory_bytes)}" for d in devices)
        total = max(whole.values(), key=lambda m: m.need_bytes).need_bytes
        raise NoPlacement(f"the model needs about {mib(total)} (weights and a KV cache of {need.context_tokens} "
                          f"tokens) and these devices together cannot hold it ({held}): add a device, lower "
                          "--max-model-len, or use a smaller --dtype or model")
    return split


def _holds(devices: list[DeviceFacts], whole: dict[str, Member]) -> str:
    return "; ".join(f"{d.device} needs {mib(whole[d.device].need_bytes)}, has {mib(usable_bytes(d))} usable"
                     for d in devices)


def _whole(device: DeviceFacts, need: ModelNeed) -> Member:
    last = need.layers - 1
    held = held_bytes(device, need, 0, last, 1)
    return Member(device.device, 0, last, seconds_per_token(device, need, 0, last, True), held,
                  f"needs {mib(held)} of {mib(usable_bytes(device))} usable ({device.memory_evidence}); "
                  f"{device.speed_evidence}")


def _single(best: DeviceFacts, devices: list[DeviceFacts], whole: dict[str, Member],
            verdict: ReplicaVerdict | None) -> Placement:
    """`best` alone; each other device named with why it is left out, and where replicas were weighed, what they
    predicted."""
    chosen = whole[best.device]
    left = []
    for other in devices:
        if other is best:
            continue
        member = whole[other.device]
        slower = member.seconds_per_token > chosen.seconds_per_token
        speed = (f"slower ({member.seconds_per_token * 1e3:.3g} ms/token predicted against "
                 f"{chosen.seconds_per_token * 1e3:.3g}; {other.speed_evidence})")
        if member.need_bytes > usable_bytes(other):
            why = (f"too small: the model and its KV cache need {mib(member.need_bytes)}, it has "
                   f"{mib(usable_bytes(other))} usable ({other.memory_evidence})") + (f"; and {speed}" if slower
                                                                                    else "")
        elif verdict is None or verdict.gain is None:
            why = f"{speed}, and would only add transfers"
        else:
            why = f"{speed}; as a replica: {verdict.said}"
        left.append((other.device, why))
    evidence = (f"{best.device} holds the model and is the fastest that does "
                f"({chosen.seconds_per_token * 1e3:.3g} ms/token predicted from its measured bandwidth)")
    if verdict is None:
        return Placement(SINGLE, (chosen,), tuple(left), "", evidence)
    return Placement(SINGLE, (replace(chosen, step_cost=best.step_cost),), tuple(left), "",
                     f"{evidence}; not replicas: {verdict.said}", verdict.prediction)


__all__ = ["LAYER_SPLIT", "NoPlacement", "memory_proportional_split", "plan_placement"]
