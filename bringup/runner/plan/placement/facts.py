"""One device as the placement planner sees it: figures read from its profile (memory, measured bandwidth and
matmul rate, the dtype its plan would run), with their evidence. Nothing else about the device is read."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bringup.profiles.schema import Profile
from bringup.runner.plan.placement.step_cost import StepCost
from bringup.runner.plan.plan import choose_dtype
from bringup.runner.plan.profile_facts import ProfileFacts


@dataclass(frozen=True)
class DeviceFacts:
    device: str  # a label for the plan and the logs; never compared but for identity
    memory_bytes: int  # what the model may take: the profile's total memory, or the --device-memory cap
    memory_evidence: str
    gbps: float  # the best measured bandwidth kernel (bench)
    tflops: float | None  # the best measured matmul rate in `dtype` (bench), for prefill
    dtype: str  # what this device's plan runs in (the plan's dtype rule on its profile, or --dtype)
    speed_evidence: str
    peer_access: bool  # the probe proved direct copies to another device
    layer_overhead_s: float = 0.0  # a layer's measured decode time beyond its bytes over `gbps` (0: not measured)
    step_cost: StepCost | None = None  # the whole model's decode step by batch and prefill, measured (replicas)

    @property
    def itemsize(self) -> int:
        return getattr(torch, self.dtype).itemsize


class UnplaceableDevice(ValueError):
    """The profile lacks a figure the planner needs; the message says which and what to run."""


def device_facts(device: str, profile: Profile, cap: int | None, dtype: str | None) -> DeviceFacts:
    facts = ProfileFacts(profile)
    total = profile.device.memory_total_bytes if profile.device else None
    if total is None and cap is None:
        raise UnplaceableDevice(f"the profile of {device} records no memory size: run `bringup devices --device "
                                f"{device}`, or cap it with --device-memory {device}=SIZE")
    bench = profile.bench
    gbps = bench.ceilings.gbps if bench is not None and bench.ceilings is not None else None
    if not gbps:
        raise UnplaceableDevice(f"the profile of {device} has no measured bandwidth: run `bringup bench --device "
                                f"{device}` (the planner weighs devices by measured speed, never by name)")
    memory, memory_evidence = _memory(total, cap)
    chosen = dtype if dtype and dtype != "auto" else choose_dtype(facts).value
    tflops = facts.bench_tflops(chosen)
    peer = _direct_peer_access(profile)
    speed = f"bench: {gbps:.1f} GB/s" + (f", {tflops:.3g} TFLOP/s {chosen}" if tflops else "")
    return DeviceFacts(device, memory, memory_evidence, float(gbps), tflops, chosen, speed, peer)


def _memory(total: int | None, cap: int | None) -> tuple[int, str]:
    if cap is not None and (total is None or cap < total):
        return cap, f"capped at {cap / (1 << 20):.0f} MiB (--device-memory)"
    assert total is not None
    return total, f"{total / (1 << 20):.0f} MiB (profile)"


def _direct_peer_access(profile: Profile) -> bool:
    """The probe proved direct copies to another device (not through the host)."""
    caps = profile.capabilities
    found = caps.groups().get("features", {}).get("peer_access") if caps else None
    details = found.details if found is not None and isinstance(found.details, dict) else {}
    return found is not None and found.status == "supported" and bool(details.get("direct"))
