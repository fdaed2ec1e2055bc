"""The placement planner on devices given as data (figures a profile holds), never on a live device: the fastest
device that holds the model alone, the others named with why; a split that fills the fastest device first when
none holds it; an expert's proportions checked against each cap. Device ids are labels: swapping them changes
nothing but the labels."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile
from bringup.runner.plan.placement.cost import usable_bytes
from bringup.runner.plan.placement.facts import DeviceFacts, UnplaceableDevice, device_facts
from bringup.runner.plan.placement.given import memory_caps, split_proportions
from bringup.runner.plan.placement.layer_term import with_layer_time
from bringup.runner.plan.placement.need import ModelNeed
from bringup.runner.plan.placement.placement import LAYER_SPLIT, SINGLE, shown_placement
from bringup.runner.plan.placement.planner import NoPlacement, plan_placement
from bringup.runner.plan.placement.split import SplitRefused, memory_proportional_split

MiB = 1 << 20
REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"
# 24 layers of 10 MiB in float32 (2.5 M elements), 40 MiB of embeddings, a small KV cache
NEED = ModelNeed(layers=24, layer_elements=(10 * MiB // 4,) * 24, other_elements=40 * MiB // 4,
                 kv_elements_per_token=256, context_tokens=512, hidden_size=512)


def device(name: str, memory_mib: int, gbps: float) -> DeviceFacts:
    return DeviceFacts(name, memory_mib * MiB, f"{memory_mib} MiB (profile)", gbps, None, "float32",
                       f"bench: {gbps} GB/s", False)


def test_the_fastest_device_that_holds_the_model_runs_it_alone_and_the_others_are_named_with_why() -> None:
    fast, slow, small = device("x:0", 1024, 50.0), device("x:1", 4096, 10.0), device("x:2", 128, 20.0)
    placement = plan_placement([slow, small, fast], NEED)
    assert placement.mode == SINGLE and [m.device for m in placement.members] == ["x:0"]
    assert (placement.members[0].first, placement.members[0].last) == (0, 23)
    why = dict(placement.left_out)
    assert why["x:1"].startswith("slower (") and why["x:1"].endswith("and would only add transfers")
    assert why["x:2"].startswith("too small: the model and its KV cache need") and "; and slower (" in why["x:2"]
    assert shown_placement(placement.as_value()) == "single: x:0 layers [0, 23]; left out: x:1, x:2"


def test_the_ids_are_labels_only() -> None:
    a, b = device("x:0", 1024, 50.0), device("x:1", 4096, 10.0)
    renamed = [replace(b, device="x:0"), replace(a, device="x:1")]
    assert plan_placement([a, b], NEED).members[0].device == "x:0"
    assert plan_placement(renamed, NEED).members[0].device == "x:1"  # the fast one, whatever it is called


def test_a_model_that_fits_neither_device_is_split_with_more_layers_on_the_fast_one_than_memory_alone_gives() -> None:
    fast_small, slow_large = device("x:0", 200, 40.0), device("x:1", 260, 10.0)  # the model needs about 330 MiB
    devices = [fast_small, slow_large]
    placement = plan_placement(devices, NEED)
    by_id = {d.device: d for d in devices}
    assert placement.mode == LAYER_SPLIT
    counts = {m.device: m.last - m.first + 1 for m in placement.members}
    proportional = {m.device: m.last - m.first + 1 for m in memory_proportional_split(devices, NEED).members}
    assert sum(counts.values()) == 24 and counts["x:0"] > proportional["x:0"]
    # contiguous; the fast device runs last, with the output head
    assert [(m.device, m.first, m.last) for m in placement.members] == [
        ("x:1", 0, 23 - counts["x:0"]), ("x:0", 24 - counts["x:0"], 23)]
    assert all(m.need_bytes <= usable_bytes(by_id[m.device]) for m in placement.members)
    assert placement.seconds_per_token < memory_proportional_split(devices, NEED).seconds_per_token
    assert "through the host" in placement.crossing and "memory alone would put" in placement.evidence


def test_a_split_beats_the_only_device_that_holds_the_model_when_that_one_is_much_slower() -> None:
    fast_small, slow_large = device("x:0", 200, 40.0), device("x:1", 4096, 10.0)
    placement = plan_placement([fast_small, slow_large], NEED)
    assert placement.mode == LAYER_SPLIT and placement.members[-1].device == "x:0"
    assert "on x:1 alone, the fastest that holds it" in placement.evidence
    near = plan_placement([replace(fast_small, gbps=10.5), slow_large], NEED)  # too little gain for the crossings
    assert near.mode == SINGLE and near.members[0].device == "x:1"


def test_devices_that_together_cannot_hold_the_model_are_refused_with_what_each_holds() -> None:
    with pytest.raises(NoPlacement, match=r"together cannot hold it \(x:0 .* of 100 MiB; x:1 .* of 100 MiB\)"):
        plan_placement([device("x:0", 100, 40.0), device("x:1", 100, 10.0)], NEED)


def test_an_experts_split_is_taken_in_the_order_of_the_devices_and_checked_against_each_cap() -> None:
    devices = [device("x:0", 400, 40.0), device("x:1", 400, 10.0)]
    placement = plan_placement(devices, NEED, [1.0, 3.0])
    assert [(m.device, m.first, m.last) for m in placement.members] == [("x:0", 0, 5), ("x:1", 6, 23)]
    with pytest.raises(SplitRefused, match=r"puts layers \[0, 23\] on x:0: they need .* give it a smaller share"):
        plan_placement([device("x:0", 200, 40.0), devices[1]], NEED, [1.0, 0.0])
    with pytest.raises(SplitRefused, match="gives 3 proportions for 2 devices"):
        plan_placement(devices, NEED, [1.0, 1.0, 1.0])


def test_the_command_line_inputs_are_read_or_refused_in_one_line() -> None:
    assert memory_caps("emu:1=2GiB, cpu=512MiB") == {"emu:1": 2 << 30, "cpu": 512 << 20}
    assert split_proportions("3,1") == [3.0, 1.0]
    for bad, message in (("emu:1", "is not DEVICE=SIZE"), ("emu:1=lots", "'lots' is not a size"),
                         ("emu:1=0", "at least 1 byte")):
        with pytest.raises(ValueError, match=message):
            memory_caps(bad)
    with pytest.raises(ValueError, match="'x' is not a number"):
        split_proportions("1,x")
    with pytest.raises(ValueError, match="must be a finite number, 0 or more"):
        split_proportions("1,-2")


def test_a_profile_gives_its_memory_and_measured_bandwidth_and_a_cap_lowers_the_memory() -> None:
    profile = load_profile(REFERENCE / "nvidia-h200-sxm-torch2.11-cu130.yaml")
    facts = device_facts("cuda:0", profile, None, None)
    assert facts.memory_bytes == profile.device.memory_total_bytes
    assert facts.gbps == profile.bench.ceilings.gbps
    capped = device_facts("cuda:0", profile, 2 << 30, None)
    assert capped.memory_bytes == 2 << 30 and "--device-memory" in capped.memory_evidence


def test_a_profile_without_a_measured_bandwidth_names_the_command_to_run() -> None:
    with pytest.raises(UnplaceableDevice, match=r"no measured bandwidth: run `bringup bench --device cuda:0`"):
        device_facts("cuda:0", Profile(device=load_profile(REFERENCE / "nvidia-h200-sxm-torch2.11-cu130.yaml")
                                       .device), None, None)


def test_a_measured_per_layer_time_orders_the_split_and_is_recorded_as_evidence() -> None:
    # x:0 streams 4x faster but its timed layer took 20 ms (the ops' dispatch, not the bytes); x:1's 0.5 ms
    layer_s = NEED.layer_elements[0] * 4 / 1e9
    quick_bytes = with_layer_time(device("x:0", 200, 40.0), NEED, 0.020, "a layer timed at 20 ms")
    quick_ops = with_layer_time(device("x:1", 260, 10.0), NEED, 0.0005, "a layer timed at 0.5 ms")
    assert quick_bytes.layer_overhead_s == pytest.approx(0.020 - layer_s / 40.0)
    assert quick_ops.layer_overhead_s == 0.0  # its bytes alone take longer than the timed layer: the bytes count
    assert "a layer timed at 20 ms: 19.7 ms beyond its bytes over 40 GB/s (0.262 ms)" in quick_bytes.speed_evidence
    split = plan_placement([quick_bytes, quick_ops], NEED)
    counts = {m.device: m.last - m.first + 1 for m in split.members}
    assert split.members[-1].device == "x:1" and counts["x:1"] > counts["x:0"]  # the quicker layers fill first
    member = split.members[0]
    layers = member.last - member.first + 1
    assert member.seconds_per_token == pytest.approx(layers * 0.020)  # its bytes and overhead; no head on it
    assert quick_bytes.speed_evidence in member.evidence
