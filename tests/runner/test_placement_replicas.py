"""The planner's replicas mode on devices given as data: chosen unasked where the devices' predicted decode rates
add to 1.3x the fastest's, not below; each replica named with its rank and evidence, fastest first; --placement
forces a mode or is refused in one line where the devices cannot run it."""

from __future__ import annotations

import pytest

from bringup.runner.plan.placement.given import placement_mode
from bringup.runner.plan.placement.placement import LAYER_SPLIT, REPLICAS, SINGLE, shown_placement
from bringup.runner.plan.placement.planner import NoPlacement, plan_placement
from tests.runner.test_placement_planner import NEED, device


def test_two_devices_that_each_hold_the_model_run_replicas_when_together_they_decode_clearly_faster() -> None:
    fast, half = device("x:1", 1024, 40.0), device("x:0", 2048, 20.0)
    placement = plan_placement([half, fast], NEED)
    assert placement.mode == REPLICAS and [m.device for m in placement.members] == ["x:1", "x:0"]
    assert [(m.first, m.last) for m in placement.members] == [(0, 23), (0, 23)]
    assert placement.members[0].evidence.startswith("replica 1 of 2: needs ")
    assert "1.50x the decode rate of x:1 alone predicted" in placement.evidence
    assert shown_placement(placement.as_value()) == "replicas: x:1 replica 1, x:0 replica 2"
    slow = device("x:0", 2048, 10.0)  # together 1.25x: under the gain, the fastest alone
    assert plan_placement([slow, fast], NEED).mode == SINGLE


def test_placement_forces_a_mode_or_says_why_the_devices_cannot_run_it() -> None:
    fast, slow, small = device("x:0", 1024, 40.0), device("x:1", 2048, 10.0), device("x:2", 128, 20.0)
    assert plan_placement([fast, slow], NEED, mode=REPLICAS).mode == REPLICAS
    assert plan_placement([fast, device("x:1", 2048, 20.0)], NEED, mode=SINGLE).mode == SINGLE
    assert plan_placement([device("x:0", 200, 40.0), device("x:1", 200, 10.0)], NEED,
                          mode=LAYER_SPLIT).mode == LAYER_SPLIT
    with pytest.raises(NoPlacement, match=r"every layer on x:0, which holds the model alone; give the proportions"):
        plan_placement([fast, small], NEED, mode=LAYER_SPLIT)
    with pytest.raises(NoPlacement, match=r"^--placement replicas needs two devices that each hold the model; 1 of 2"):
        plan_placement([fast, small], NEED, mode=REPLICAS)
    assert placement_mode("Split") == LAYER_SPLIT and placement_mode(None) == "auto"
    with pytest.raises(ValueError, match=r"^--placement 'pairs' is not a placement mode; use one of auto, single, "):
        placement_mode("pairs")


def test_the_router_splits_a_batch_only_where_the_measured_step_grows_with_it() -> None:
    from types import SimpleNamespace

    from bringup.runner.engine.replicas.replica import Replica
    from bringup.runner.engine.replicas.step_cost import measured_cost
    from bringup.runner.plan.choice import Choice

    # the engine's plan is read for its batch size only: eight seats on each replica
    engine = SimpleNamespace(plan=SimpleNamespace(max_num_seqs=Choice(8, "given")))
    growing = {"fast": measured_cost(0.30, 0.70, 8, 0.80, 160), "slow": measured_cost(0.60, 1.40, 8, 1.60, 160)}
    assert growing["fast"].per_seq_s == pytest.approx(0.4 / 7) and growing["fast"].prefill_s_per_token == 0.005
    assert "decode step 300 ms at batch 1, 700 ms at batch 8; prefill 5.00 ms a token" in growing["fast"].evidence
    flat = {"fast": measured_cost(0.30, 0.32, 8, 0.80, 160), "slow": measured_cost(0.60, 0.64, 8, 1.60, 160)}
    for costs, eighth_goes_to in ((growing, "slow"), (flat, "fast")):
        fast = Replica("fast", engine, None, 0.3, cost=costs["fast"])  # type: ignore[arg-type]
        slow = Replica("slow", engine, None, 0.6, cost=costs["slow"])  # type: ignore[arg-type]
        fast.held = {f"r{i}": 16 for i in range(7)}  # seven requests of 16 tokens to go on the fast one
        chosen = min((fast, slow), key=lambda r: r.predicted_s(16 + 5, 5))
        assert chosen.device == eighth_goes_to, (costs, fast.predicted_s(21, 5), slow.predicted_s(21, 5))
    assert fast.predicted_s(21, 5) == pytest.approx(5 * 0.005 + 16 * flat["fast"].decode_s(8))
    fast.unprefilled = {f"r{i}": 160 for i in range(7)}  # their 160-token prompts not prefilled yet: they go first
    assert fast.predicted_s(21, 5) == pytest.approx((5 + 7 * 160) * 0.005 + 16 * flat["fast"].decode_s(8))
    assert slow.predicted_s(21, 5) < fast.predicted_s(21, 5)
