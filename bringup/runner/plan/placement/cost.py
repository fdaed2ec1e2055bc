"""What a run of layers costs on one device: the bytes it must hold and the time per token it predicts. A decode
step streams each weight once, so its time is its weights over the device's measured bandwidth, plus each layer's
measured time beyond its bytes (its ops' dispatch: on a slow device and a small model, most of the step)."""

from __future__ import annotations

from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.need import ModelNeed

# the part of each device's memory left for activations, the allocator's slack and the runtime: a member may fill
# the rest with its weights and its share of the KV cache
RESERVE = 0.1


def usable_bytes(device: DeviceFacts) -> int:
    return int(device.memory_bytes * (1 - RESERVE))


def weight_bytes(device: DeviceFacts, need: ModelNeed, first: int, last: int, ends: int) -> int:
    """Layers first..last in the device's dtype, with the embeddings and output head counted once for each end of
    the pipeline it is (`ends`: 0, 1 or 2) -- a tied head is a copy on the last member."""
    layers = sum(need.layer_elements[first:last + 1])
    return (layers + ends * need.other_elements) * device.itemsize


def held_bytes(device: DeviceFacts, need: ModelNeed, first: int, last: int, ends: int) -> int:
    kv = (last - first + 1) * need.kv_elements_per_token * need.context_tokens * device.itemsize
    return weight_bytes(device, need, first, last, ends) + kv


def seconds_per_token(device: DeviceFacts, need: ModelNeed, first: int, last: int, head: bool) -> float:
    """Its layers' bytes, and the output head's where it holds it (the embeddings are a lookup: one row read), over
    its measured bandwidth; and each layer's measured time beyond its bytes."""
    streamed = weight_bytes(device, need, first, last, int(head))
    return streamed / (device.gbps * 1e9) + (last - first + 1) * device.layer_overhead_s


def seconds_per_layer(device: DeviceFacts, need: ModelNeed) -> float:
    """A mean layer's predicted time on the device (what orders the devices of a split)."""
    return seconds_per_token(device, need, 0, need.layers - 1, False) / need.layers


def mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB"
