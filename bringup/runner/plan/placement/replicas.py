"""Replicas: several devices each hold the whole model (weights and a KV cache of one --max-model-len sequence),
and one engine per device serves requests a router places by predicted completion. Chosen unasked only where each
device's step costs were measured at the start (step_cost.py) and predict, for the stated load (replica_load.py),
at least REPLICA_GAIN over the fastest device alone; otherwise the plan says why not and the fastest runs alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.runner.plan.placement.cost import usable_bytes
from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.placement import REPLICAS, Member, Placement
from bringup.runner.plan.placement.replica_load import ReplicaGain, ReplicaLoad, replica_gain

# replicas are chosen unasked only where the measured costs predict this gain over the fastest alone: the prediction
# leaves out what running side by side costs (on the emulated pair when its devices shared the host's two cores, the
# router measured 0.82x and 0.98x where a wave's prediction said 1.10x and 1.28x; with a host thread each, the short
# prompts' steady state measured 1.13-1.15x against 1.12-1.15x predicted, the chat's 1.34-1.44x against
# 1.31-1.38x: docs/benchmarks.md)
REPLICA_GAIN = 1.2


@dataclass(frozen=True)
class ReplicaVerdict:
    gain: ReplicaGain | None  # None: a device's step costs were not measured
    said: str  # the prediction in words, or why there is none
    prediction: dict[str, Any]  # the row's: the load, each device's measured step costs, the gain and the shares

    @property
    def pays(self) -> bool:
        return self.gain is not None and self.gain.gain >= REPLICA_GAIN


def judge_replicas(holding: list[DeviceFacts], load: ReplicaLoad) -> ReplicaVerdict:
    """What replicas on `holding` (each holds the model) predict for `load` against the fastest alone."""
    prediction: dict[str, Any] = {"load": {"requests": load.requests, "prompt_tokens": load.prompt_tokens,
                                           "new_tokens": load.new_tokens}}
    unmeasured = [d.device for d in holding if d.step_cost is None]
    if unmeasured:
        return ReplicaVerdict(None, f"replicas not weighed: no step costs measured on {', '.join(unmeasured)}",
                              prediction)
    costs = [d.step_cost for d in holding if d.step_cost is not None]
    found = replica_gain(costs, load)
    shares = ", ".join(f"{k} on {d.device}" for d, k in zip(holding, found.shares))
    measured = "; ".join(f"{d.device} {c.decode_s(1) * 1e3:.3g} ms a decode step at batch 1, "
                         f"{c.decode_s(load.requests) * 1e3:.3g} at batch {load.requests}, "
                         f"{c.prefill_s_per_token * 1e3:.3g} ms a prefill token" for d, c in zip(holding, costs))
    said = (f"replicas predict {found.gain:.2f}x over {holding[found.fastest].device} alone for {load.said} "
            f"(best shares {shares}: {found.split_rate:.3g} requests/s against {found.alone_rate:.3g}; from the step "
            f"costs measured on each at the start: {measured}; replicas are chosen unasked from {REPLICA_GAIN}x)")
    prediction |= {"step_costs": {d.device: c.as_value() for d, c in zip(holding, costs)}, "gain": found.gain,
                   "shares": {d.device: k for d, k in zip(holding, found.shares)}}
    return ReplicaVerdict(found, said, prediction)


def replica_placement(holding: list[DeviceFacts], whole: dict[str, Member], devices: list[DeviceFacts],
                      verdict: ReplicaVerdict) -> Placement:
    """One replica on each device of `holding`, fastest first, each with its measured step costs; the others left
    out; the prediction (the stated load, the gain, each one's share) in the row."""
    order = sorted(range(len(holding)), key=lambda i: whole[holding[i].device].seconds_per_token)
    members = []
    for rank, i in enumerate(order):
        d, member = holding[i], whole[holding[i].device]
        cost = f"; step costs: {d.step_cost.evidence}" if d.step_cost is not None else ""
        members.append(Member(d.device, member.first, member.last, member.seconds_per_token, member.need_bytes,
                              f"replica {rank + 1} of {len(order)}: {member.evidence}{cost}", d.step_cost))
    left = tuple((d.device, f"too small: the model and its KV cache need {whole[d.device].need_bytes >> 20} MiB, "
                            f"it has {usable_bytes(d) >> 20} MiB usable ({d.memory_evidence})")
                 for d in devices if d not in holding)
    evidence = (f"{len(order)} devices each hold the model: one engine each, requests routed by predicted "
                f"completion; {verdict.said}")
    return Placement(REPLICAS, tuple(members), left, "none: each replica holds the whole model", evidence,
                     verdict.prediction)
