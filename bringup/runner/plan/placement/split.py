"""Layer splits: contiguous runs of layers, one per member, in pipeline order.

- fastest: the members ordered by their predicted time per layer (bytes over measured bandwidth, plus the layer's
  measured overhead where it was timed), each filled to its memory cap before the next one takes a layer. A decode
  step runs the members one after another, so the time per token is the sum of each member's layers' times:
  filling the fastest first minimises it.
- given: proportions in the order of --device (llama.cpp's -ts), checked against each device's cap.
- memory-proportional: layers in proportion to each device's memory (llama.cpp's default), the reference a
  benchmark compares the fastest split against.
"""

from __future__ import annotations

from bringup.runner.plan.placement.cost import held_bytes, mib, seconds_per_layer, seconds_per_token, usable_bytes
from bringup.runner.plan.placement.facts import DeviceFacts
from bringup.runner.plan.placement.need import ModelNeed
from bringup.runner.plan.placement.placement import LAYER_SPLIT, Member, Placement


class SplitRefused(ValueError):
    """A given split puts more on a device than it can hold; the message names the device and the sizes."""


def _members(devices: list[DeviceFacts], counts: list[int], need: ModelNeed) -> list[Member]:
    held = [(d, c) for d, c in zip(devices, counts) if c > 0]
    members, first = [], 0
    for position, (device, count) in enumerate(held):
        last = first + count - 1
        ends = int(position == 0) + int(position == len(held) - 1)
        need_bytes = held_bytes(device, need, first, last, ends)
        head = position == len(held) - 1
        members.append(Member(device.device, first, last, seconds_per_token(device, need, first, last, head),
                              need_bytes, f"{count} layers, {mib(need_bytes)} of {mib(usable_bytes(device))} usable "
                                          f"({device.memory_evidence}); {device.speed_evidence}"))
        first = last + 1
    return members


def _crossing(devices: list[DeviceFacts]) -> str:
    if all(d.peer_access for d in devices):
        return "activations copied device to device (the probe proved direct peer access)"
    return "activations cross through the host (the probe found no direct peer access)"


def _placement(devices: list[DeviceFacts], counts: list[int], need: ModelNeed, evidence: str) -> Placement:
    members = _members(devices, counts, need)
    held = {m.device for m in members}
    left = tuple((d.device, "given no layers") for d in devices if d.device not in held)
    return Placement(LAYER_SPLIT, tuple(members), left, _crossing([d for d in devices if d.device in held]),
                     evidence)


def _fill(device: DeviceFacts, need: ModelNeed, left: int, holds_head: bool) -> tuple[int, bool]:
    """How many of the `left` layers not yet placed the device can hold, and whether that is all of them (it then
    holds the embeddings too: it is the first member)."""
    ends = int(holds_head)
    if held_bytes(device, need, 0, left - 1, ends + 1) <= usable_bytes(device):
        return left, True
    count = 0  # the last `count` of the layers left
    while count < left and held_bytes(device, need, left - 1 - count, left - 1, ends) <= usable_bytes(device):
        count += 1
    return count, False


def fastest_split(devices: list[DeviceFacts], need: ModelNeed) -> Placement | None:
    """The split that minimises the time per token under each device's cap; None when together they cannot hold
    the model. The fastest device is filled first and runs last, with the output head (the one large weight
    besides the layers a decode step streams); the next fastest takes the layers before, and so on."""
    by_speed = sorted(devices, key=lambda d: seconds_per_layer(d, need))
    counts, left = [], need.layers
    for position, device in enumerate(by_speed):
        count, done = _fill(device, need, left, position == 0)
        counts.append(count)
        left -= count
        if done:
            break
    if left > 0:
        return None
    pipeline = list(reversed(by_speed[:len(counts)]))
    proportional = memory_proportional_split(devices, need)
    said = ", ".join(f"{m.device} {m.last - m.first + 1}" for m in proportional.members)
    evidence = (f"the fastest device (by predicted time per layer) filled to its cap first, running last with the "
                f"output head; memory alone would put {said} layers")
    return _placement(pipeline, list(reversed(counts)), need, evidence)


def _counts(weights: list[float], layers: int) -> list[int]:
    """Whole layers in proportion to `weights`, by cumulative rounding (they add up to `layers`)."""
    total, counts, done, running = sum(weights), [], 0, 0.0
    for weight in weights:
        running += weight
        upto = round(layers * running / total)
        counts.append(upto - done)
        done = upto
    return counts


def memory_proportional_split(devices: list[DeviceFacts], need: ModelNeed) -> Placement:
    counts = _counts([float(d.memory_bytes) for d in devices], need.layers)
    return _placement(devices, counts, need, "layers in proportion to each device's memory (llama.cpp's default "
                                             "split), not checked against the caps")


def given_split(devices: list[DeviceFacts], need: ModelNeed, proportions: list[float]) -> Placement:
    if len(proportions) != len(devices):
        raise SplitRefused(f"--layer-split gives {len(proportions)} proportions for {len(devices)} devices: give one "
                           "per device, in the order of --device")
    if any(p < 0 for p in proportions) or sum(proportions) <= 0:
        raise SplitRefused("--layer-split proportions must be 0 or more, and not all 0")
    placement = _placement(devices, _counts(proportions, need.layers), need,
                           f"--layer-split {','.join(f'{p:g}' for p in proportions)} (given, in the order of --device)")
    by_id = {d.device: d for d in devices}
    for member in placement.members:
        usable = usable_bytes(by_id[member.device])
        if member.need_bytes > usable:
            raise SplitRefused(f"--layer-split puts layers [{member.first}, {member.last}] on {member.device}: they "
                               f"need {mib(member.need_bytes)}, it has {mib(usable)} usable; give it a smaller share")
    return placement
