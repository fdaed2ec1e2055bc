"""The planner's replicas mode on devices given as data: chosen unasked only where each device's measured step costs
predict, for the stated load, at least 1.2x over the fastest alone; otherwise the fastest alone, the row saying what
replicas predicted; each replica named with its rank, evidence and step costs, fastest first; --placement forces a
mode or is refused in one line where the devices cannot run it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bringup.runner.engine.replicas.router import ReplicaRouter
from bringup.runner.plan.placement.given import placement_mode
from bringup.runner.plan.placement.placement import LAYER_SPLIT, REPLICAS, SINGLE, shown_placement
from bringup.runner.plan.placement.planner import NoPlacement, plan_placement
from bringup.runner.plan.placement.replica_load import ReplicaLoad, load_seconds, replica_gain, stated_load
from bringup.runner.plan.placement.step_cost import measured_cost, step_cost_from
from tests.runner.test_placement_planner import NEED, device

LOAD = ReplicaLoad(requests=8, prompt_tokens=160, new_tokens=16)
# decode steps at batch 1 and 8, and a 160-token prefill, as start-up measures them (seconds): a step that grows
# with the batch, as on the emulated pair, and one that barely does, as a small model's on an accelerator
GROWING = {"fast": (0.30, 0.70, 0.80), "slow": (0.60, 1.40, 1.60)}
FLAT = {"fast": (0.30, 0.32, 0.80), "slow": (0.60, 0.64, 1.60)}


def costed(name: str, gbps: float, one_s: float, full_s: float, prefill_s: float):  # type: ignore[no-untyped-def]
    return replace(device(name, 2048, gbps), step_cost=measured_cost(one_s, full_s, 8, prefill_s, 160))


def test_the_gain_is_the_best_shares_steady_rate_over_the_fastest_alone() -> None:
    fast, slow = (measured_cost(*GROWING[k][:2], 8, GROWING[k][2], 160) for k in ("fast", "slow"))
    found = replica_gain([fast, slow], LOAD)
    alone = 8 / (8 * 160 * 0.005 + 16 * 0.70)  # eight requests completed per eight prefills and sixteen batch-8 steps
    assert found.alone_rate == pytest.approx(alone) and found.fastest == 0

    def rate(cost, k: int) -> float:  # type: ignore[no-untyped-def]
        return k / (k * 160 * cost.prefill_s_per_token + 16 * cost.decode_s(k)) if k else 0.0
    rates = {k: rate(fast, 8 - k) + rate(slow, k) for k in range(9)}
    best = max(rates, key=rates.__getitem__)
    assert found.shares == (8 - best, best) and found.gain == pytest.approx(rates[best] / alone) and found.gain > 1
    assert 0 < best < 8 and found.split_rate == pytest.approx(rates[best])
    assert stated_load(256, None) == ReplicaLoad(8, 128, 128) and stated_load(100, 4) == ReplicaLoad(4, 50, 50)
    assert step_cost_from(fast.as_value()) == fast


def test_replicas_are_chosen_only_where_the_measured_step_costs_predict_the_gain() -> None:
    fast, slow = costed("x:1", 40.0, *GROWING["fast"]), costed("x:0", 20.0, *GROWING["slow"])
    expected = replica_gain([slow.step_cost, fast.step_cost], LOAD).gain  # type: ignore[list-item]
    assert expected >= 1.2, expected
    placement = plan_placement([slow, fast], NEED, load=LOAD)
    assert placement.mode == REPLICAS and [m.device for m in placement.members] == ["x:1", "x:0"]
    assert [(m.first, m.last) for m in placement.members] == [(0, 23), (0, 23)]
    assert placement.members[0].evidence.startswith("replica 1 of 2: needs ")
    assert "step costs: decode step 300 ms at batch 1, 700 ms at batch 8" in placement.members[0].evidence
    value = placement.as_value()
    assert value["devices"][1]["step_cost"] == slow.step_cost.as_value()  # type: ignore[union-attr]
    assert value["prediction"]["gain"] == pytest.approx(expected)
    assert value["prediction"]["load"] == {"requests": 8, "prompt_tokens": 160, "new_tokens": 16}
    assert sum(value["prediction"]["shares"].values()) == 8
    assert f"replicas predict {expected:.2f}x over x:1 alone for 8 requests in flight, each a 160-token prompt" \
        in placement.evidence
    assert shown_placement(value) == "replicas: x:1 replica 1, x:0 replica 2"
    # the same devices whose step barely grows with the batch: a full batch on the fast one wins; said so
    flat_fast, flat_slow = costed("x:1", 40.0, *FLAT["fast"]), costed("x:0", 20.0, *FLAT["slow"])
    flat_gain = replica_gain([flat_slow.step_cost, flat_fast.step_cost], LOAD).gain  # type: ignore[list-item]
    assert flat_gain < 1.2, flat_gain
    single = plan_placement([flat_slow, flat_fast], NEED, load=LOAD)
    assert single.mode == SINGLE and single.members[0].device == "x:1"
    said = f"replicas predict {flat_gain:.2f}x over x:1 alone for 8 requests in flight"
    assert f"not replicas: {said}" in single.evidence and said in dict(single.left_out)["x:0"]
    row = single.as_value()
    assert row["devices"][0]["step_cost"] == flat_fast.step_cost.as_value()  # type: ignore[union-attr]
    assert row["prediction"]["step_costs"]["x:0"] == flat_slow.step_cost.as_value()  # type: ignore[union-attr]
    assert row["prediction"]["gain"] == pytest.approx(flat_gain)
    # without measured step costs (data that lacks them) the planner never picks replicas unasked
    unmeasured = plan_placement([device("x:0", 2048, 20.0), device("x:1", 2048, 40.0)], NEED, load=LOAD)
    assert unmeasured.mode == SINGLE and "replicas not weighed: no step costs measured on x:0, x:1" in \
        unmeasured.evidence


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
    from bringup.runner.plan.choice import Choice
    from bringup.runner.plan.placement.step_cost import measured_cost

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


def test_the_router_weighs_the_delay_a_request_brings_those_already_on_a_replica() -> None:
    from types import SimpleNamespace

    from bringup.runner.engine.replicas.replica import Replica
    from bringup.runner.plan.choice import Choice

    engine = SimpleNamespace(plan=SimpleNamespace(max_num_seqs=Choice(8, "given")))
    # the chat benchmark's step costs on the quarter- and eighth-speed emulated devices (quiet Xeon, 2026-12-07)
    fast = Replica("fast", engine, None, 0.2, cost=measured_cost(0.201, 0.359, 8, 224 * 0.00828, 224))  # type: ignore[arg-type]
    slow = Replica("slow", engine, None, 0.4, cost=measured_cost(0.393, 0.779, 8, 224 * 0.0177, 224))  # type: ignore[arg-type]
    fast.held = {f"r{i}": 16 for i in range(7)}  # seven chats decoding on the fast replica
    slow.held = {"s0": 16}
    chat = (224 + 16, 224)
    assert fast.predicted_s(*chat) < slow.predicted_s(*chat)  # its own completion alone: the fast one
    # but its prefill holds up the seven there: added, the fast replica costs more than the slow one
    delay = 7 * (224 * 0.00828 + fast.cost.per_seq_s * 16)  # type: ignore[union-attr]
    assert fast.added_s(*chat) == pytest.approx(fast.predicted_s(*chat) + delay)
    assert slow.added_s(*chat) < fast.added_s(*chat)
    fast.held = {"r0": 16}  # with one there, the fast replica adds the least
    assert fast.added_s(*chat) < slow.added_s(*chat)
    slow.cost = None  # without measured costs, a replica prices only the request's own tokens
    assert slow.added_s(*chat) == slow.predicted_s(*chat) == pytest.approx((240 + 0) * 0.4)


def test_eight_chats_at_once_settle_where_the_completion_times_balance_near_the_steady_optimum() -> None:
    from types import SimpleNamespace

    from bringup.runner.engine.replicas.replica import Replica
    from bringup.runner.plan.choice import Choice
    from bringup.runner.plan.placement.replica_load import steady_rate

    engine = SimpleNamespace(plan=SimpleNamespace(max_num_seqs=Choice(8, "given"), block_size=16), max_model_len=256,
                             blocks=SimpleNamespace(num_blocks=256))  # eight seats, room for any of the chats
    # the chat benchmark's step costs on the quarter- and eighth-speed emulated devices (2026-12-07, this Xeon)
    costs = {"fast": measured_cost(0.245, 0.536, 8, 224 * 0.01056, 224),
             "slow": measured_cost(0.518, 1.140, 8, 224 * 0.02289, 224)}
    fast = Replica("fast", engine, None, 0.2, cost=costs["fast"])  # type: ignore[arg-type]
    slow = Replica("slow", engine, None, 0.4, cost=costs["slow"])  # type: ignore[arg-type]
    router = SimpleNamespace(replicas=[fast, slow])
    for index in range(8):
        chosen = ReplicaRouter._route(router, 224, 16)  # type: ignore[arg-type]
        chosen.held[f"c{index}"], chosen.unprefilled[f"c{index}"] = 240, 224
    chat = ReplicaLoad(1, 224, 16)

    def rate(shares: tuple[int, int]) -> float:
        return steady_rate(costs["fast"], chat, shares[0]) + steady_rate(costs["slow"], chat, shares[1])
    settled, best = (len(fast.held), len(slow.held)), max(((k, 8 - k) for k in range(9)), key=rate)
    assert settled == (6, 2) and best == (5, 3)  # the completion times' balance, one short of the rate's optimum
    assert rate(settled) > 0.98 * rate(best) and rate(settled) / rate((8, 0)) > 1.3
    lives = {name: load_seconds(costs[name], chat, k) for name, k in zip(costs, settled)}
    at_best = {name: load_seconds(costs[name], chat, k) for name, k in zip(costs, best)}
    assert abs(lives["slow"] / lives["fast"] - 1) < 0.1 < at_best["slow"] / at_best["fast"] - 1  # balanced vs not
