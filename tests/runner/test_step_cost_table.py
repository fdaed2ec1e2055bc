"""Decode steps timed at each batch (plan/placement/step_cost.py): the router's cost at a batch is the timed step
there, interpolated between timed batches and carried past the largest by the line's slope; the table survives the
placement row; and the batches an engine times (engine/replicas/engine_costs.py)."""

from __future__ import annotations

import pytest

from bringup.runner.engine.replicas.engine_costs import EVERY_BATCH_TO, timed_batches
from bringup.runner.plan.placement.step_cost import measured_cost, step_cost_from, tabled_cost

# an eighth-speed emulated device's floors on a 2-core EPYC (stop 68): not a line, not monotone
STEPS = {1: 0.551, 2: 0.812, 3: 1.125, 4: 0.723, 6: 1.028, 8: 1.354}


def test_the_timed_steps_are_read_at_their_batch_and_interpolated_between():
    cost = tabled_cost(STEPS, 2.24, 224, "(timed)")
    assert [cost.decode_s(b) for b in STEPS] == list(STEPS.values())
    assert cost.decode_s(5) == pytest.approx((0.723 + 1.028) / 2)
    line = measured_cost(0.551, 1.354, 8, 2.24, 224)
    assert (cost.base_s, cost.per_seq_s, cost.prefill_s_per_token) == (line.base_s, line.per_seq_s, 0.01)
    assert cost.decode_s(3) > 1.4 * line.decode_s(3)  # where the line through batch 1 and 8 is wrong
    assert cost.decode_s(10) == pytest.approx(1.354 + 2 * line.per_seq_s)
    assert cost.decode_s(0) == 0.551  # never below the smallest timed batch
    assert cost.evidence.startswith("decode step ms by batch 1: 551, 2: 812, 3: 1125, 4: 723, 6: 1028, 8: 1354; "
                                    "prefill 10.00 ms a token (224 tokens timed) (timed)")


def test_an_arrival_never_speeds_the_others_steps():
    cost = tabled_cost(STEPS, 2.24, 224)
    assert cost.added_s(2) == pytest.approx(1.125 - 0.812)
    assert cost.added_s(3) == 0.0  # batch 4 timed faster than batch 3
    line = measured_cost(0.551, 1.354, 8, 2.24, 224)
    assert line.added_s(3) == pytest.approx(line.per_seq_s)


def test_the_table_survives_the_placement_row_and_a_row_without_one_is_a_line():
    cost = tabled_cost(STEPS, 2.24, 224)
    assert step_cost_from(cost.as_value()) == cost
    assert cost.as_value()["decode_steps"]["3"] == 1.125
    line = measured_cost(0.551, 1.354, 8, 2.24, 224)
    assert "decode_steps" not in line.as_value() and step_cost_from(line.as_value()) == line


def test_every_small_batch_is_timed_then_powers_of_two_and_the_load():
    assert timed_batches(1) == [1]
    assert timed_batches(4) == [1, 2, 3, 4]
    assert timed_batches(EVERY_BATCH_TO) == list(range(1, EVERY_BATCH_TO + 1))
    assert timed_batches(40) == [*range(1, EVERY_BATCH_TO + 1), 16, 32, 40]
    assert timed_batches(32) == [*range(1, EVERY_BATCH_TO + 1), 16, 32]
