"""Replicas: several devices each hold the whole model (weights and a KV cache of one --max-model-len sequence),
and one engine per device serves requests a router places by predicted completion. It pays where the devices
together decode faster than the fastest alone by REPLICA_GAIN (their predicted rates add: each replica streams its
own weights); a slower replica is a loss for one request and a gain for many."""

from __future__ import annotations

from bringup.runner.plan.placement.cost import usable_bytes
from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.placement import REPLICAS, Member, Placement

# replicas are chosen unasked only where the devices' predicted decode rates add up to this share over the
# fastest device's: the router's placement and each replica's start are not in the prediction
REPLICA_GAIN = 1.3


def replica_placement(holding: list[DeviceFacts], whole: dict[str, Member], devices: list[DeviceFacts]) -> Placement:
    """One replica on each device of `holding` (each holds the model), fastest first; the others left out."""
    ranked = sorted(holding, key=lambda d: whole[d.device].seconds_per_token)
    fastest = whole[ranked[0].device].seconds_per_token
    members = tuple(
        Member(d.device, whole[d.device].first, whole[d.device].last, whole[d.device].seconds_per_token,
               whole[d.device].need_bytes, f"replica {rank + 1} of {len(ranked)}: {whole[d.device].evidence}")
        for rank, d in enumerate(ranked))
    left = tuple((d.device, f"too small: the model and its KV cache need {whole[d.device].need_bytes >> 20} MiB, "
                            f"it has {usable_bytes(d) >> 20} MiB usable ({d.memory_evidence})")
                 for d in devices if d not in holding)
    gain = replica_gain(holding, whole)
    evidence = (f"{len(ranked)} devices each hold the model: one engine each, requests routed by predicted "
                f"completion; {gain:.2f}x the decode rate of {ranked[0].device} alone predicted "
                f"({fastest * 1e3:.3g} ms/token there)")
    return Placement(REPLICAS, members, left, "none: each replica holds the whole model", evidence)


def replica_gain(holding: list[DeviceFacts], whole: dict[str, Member]) -> float:
    """The devices' predicted decode rates together over the fastest one's."""
    rates = [1.0 / whole[d.device].seconds_per_token for d in holding]
    return sum(rates) / max(rates)
