"""A replica's pace (engine/replicas/pace.py): its steps' measured time over what its start-up step costs predict for
the work the steps did, and the router's predictions scaled by it, so a device whose start left its costs low is
sent what its measured steps say it can take. Replicas on stated engines, steps given as data."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from bringup.runner.engine.replicas.pace import FASTEST, SLOWEST, Pace, predicted_step_s
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.engine.replicas.router import ReplicaRouter
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.placement.step_cost import StepCost, measured_cost

ENGINE = SimpleNamespace(plan=SimpleNamespace(max_num_seqs=Choice(8, "given"), block_size=16), max_model_len=256,
                         blocks=SimpleNamespace(num_blocks=256))
# the chat benchmark's step costs on the quarter- and eighth-speed emulated devices (2026-12-07, the Xeon)
FAST = measured_cost(0.245, 0.536, 8, 224 * 0.01056, 224)
SLOW = measured_cost(0.518, 1.140, 8, 224 * 0.02289, 224)


def slower(cost: StepCost, factor: float) -> StepCost:
    return replace(cost, base_s=cost.base_s * factor, per_seq_s=cost.per_seq_s * factor,
                   prefill_s_per_token=cost.prefill_s_per_token * factor)


def out(request_id: str) -> SimpleNamespace:
    return SimpleNamespace(request_id=request_id, token_ids=[7])


def settle(fast: Replica, slow: Replica, chats: int = 8) -> tuple[int, int]:
    """Where `chats` 224-token chats sent at once land."""
    router = SimpleNamespace(replicas=[fast, slow])
    for index in range(chats):
        chosen = ReplicaRouter._route(router, 224, 16)  # type: ignore[arg-type]
        chosen.held[f"c{index}"], chosen.unprefilled[f"c{index}"] = 240, 224
    return len(fast.held), len(slow.held)


def test_a_step_is_predicted_from_the_prompts_it_finished_and_the_tokens_it_decoded() -> None:
    assert predicted_step_s(FAST, 224, 0) == pytest.approx(224 * FAST.prefill_s_per_token)
    assert predicted_step_s(FAST, 0, 3) == pytest.approx(FAST.decode_s(3))
    assert predicted_step_s(FAST, 100, 2) == pytest.approx(100 * FAST.prefill_s_per_token + FAST.decode_s(2))
    assert predicted_step_s(FAST, 0, 0) == 0.0


def test_the_pace_is_measured_over_predicted_decayed_and_bounded() -> None:
    pace = Pace()
    assert pace.factor == 1.0  # nothing measured: the start's costs stand
    pace.add(0.5, 0.0)  # a prompt's first chunk: time spent, its prediction comes with the step that finishes it
    assert pace.factor == 1.0
    pace.add(1.5, 1.0)
    assert pace.factor == pytest.approx((0.9 * 0.5 + 1.5) / 1.0)
    for _ in range(200):  # the device got faster: the pace follows the recent steps
        pace.add(1.0, 1.0)
    assert pace.factor == pytest.approx(1.0, abs=1e-6) and pace.steps == 202
    for _ in range(50):
        pace.add(100.0, 1.0)
    assert pace.factor == SLOWEST
    for _ in range(200):
        pace.add(0.01, 1.0)
    assert pace.factor == FASTEST


def test_a_replica_books_its_steps_outputs_into_its_pace_and_scales_its_predictions() -> None:
    replica = Replica("slow", ENGINE, None, 0.4, cost=SLOW)  # type: ignore[arg-type]
    replica.held |= {"new": 240, "old": 10, "other": 30}
    replica.unprefilled["new"] = 224
    before, own = replica.added_s(240, 224), replica.predicted_s(240, 224)
    predicted = 224 * SLOW.prefill_s_per_token + SLOW.decode_s(1)  # "new" finished its prompt, "old" decoded one
    replica.paced([out("new"), out("old"), out("elsewhere"), SimpleNamespace(request_id="other", token_ids=[])],
                  2 * predicted)
    assert replica.pace.factor == pytest.approx(2.0)
    assert replica.added_s(240, 224) == pytest.approx(2 * before)
    assert replica.predicted_s(240, 224) == pytest.approx(2 * own)
    unmeasured = Replica("plain", ENGINE, None, 0.4)  # type: ignore[arg-type]
    unmeasured.held["a"] = 10
    unmeasured.paced([out("a")], 5.0)
    assert unmeasured.pace.steps == 0  # without step costs there is nothing to compare the steps with


def test_a_device_whose_start_underrated_it_is_sent_what_its_measured_steps_say() -> None:
    truth = settle(Replica("fast", ENGINE, None, 0.2, cost=FAST),  # type: ignore[arg-type]
                   Replica("slow", ENGINE, None, 0.4, cost=SLOW))  # type: ignore[arg-type]
    low = slower(SLOW, 1 / 1.4)  # the start timed the slow device 1.4x faster than its steps run
    trusting = settle(Replica("fast", ENGINE, None, 0.2, cost=FAST),  # type: ignore[arg-type]
                      Replica("slow", ENGINE, None, 0.4, cost=low))  # type: ignore[arg-type]
    assert trusting[1] > truth[1]  # the start's costs alone send the slow device more than its share

    fast = Replica("fast", ENGINE, None, 0.2, cost=FAST)  # type: ignore[arg-type]
    slow = Replica("slow", ENGINE, None, 0.4, cost=low)  # type: ignore[arg-type]
    for replica, cost in ((fast, FAST), (slow, SLOW)):  # each serves a chat; its steps take what its true costs say
        replica.held["warm"], replica.unprefilled["warm"] = 240, 224
        replica.paced([out("warm")], predicted_step_s(cost, 224, 0))
        del replica.unprefilled["warm"]
        for _ in range(15):
            replica.paced([out("warm")], predicted_step_s(cost, 0, 1))
        del replica.held["warm"]
    assert fast.pace.factor == pytest.approx(1.0) and slow.pace.factor == pytest.approx(1.4)
    assert settle(fast, slow) == truth
