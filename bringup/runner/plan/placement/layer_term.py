"""A device's measured per-layer term for the cost model: what a timed layer (engine/layer_timing.py) took beyond
its bytes over the device's measured bandwidth, recorded with the timing as the device's speed evidence."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.plan.placement.cost import seconds_per_layer
from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.need import ModelNeed


def with_layer_time(device: DeviceFacts, need: ModelNeed, seconds: float, evidence: str) -> DeviceFacts:
    """`device` with the per-layer term from a layer timed at `seconds` (0 where its bytes alone take longer)."""
    streamed = seconds_per_layer(replace(device, layer_overhead_s=0.0), need)
    overhead = max(seconds - streamed, 0.0)
    said = (f"{evidence}: {overhead * 1e3:.3g} ms beyond its bytes over {device.gbps:.3g} GB/s "
            f"({streamed * 1e3:.3g} ms)")
    return replace(device, layer_overhead_s=overhead, speed_evidence=f"{device.speed_evidence}; {said}")
