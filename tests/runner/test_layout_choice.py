"""The weight layout follows the timings it is given: per step size, with a margin, and memory for a copy."""

from __future__ import annotations

import torch

from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.host_kernels import choose_layout
from bringup.runner.plan.layout import LayoutTimings, linear_weight_bytes
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sources.builtin_model import builtin_config
from tests.runner.stated import GIB, ROWS, layout_times

CONFIG = builtin_config()


def choose(timings: LayoutTimings, free_bytes: int | None = 16 * GIB) -> tuple[WeightLayout, str]:
    layout, choice = choose_layout(ProfileFacts(None), timings, torch.float32, CONFIG, free_bytes)
    assert choice.value == layout.describe()
    return layout, choice.evidence


def flipping_at_8_rows() -> LayoutTimings:
    """slices are fastest for 1–4 rows, x @ W from 8 rows on."""
    times = {m: {"in_out": 2e-6 * m, "out_in": 2.2e-6 * m, "slices": (1e-6 if m <= 4 else 9e-6) * m} for m in ROWS}
    return LayoutTimings(times)


def test_f_linear_winning_everywhere_is_one_layout():
    layout, evidence = choose(layout_times(in_out=2.0, out_in=1.0, slices=1.5))
    assert layout == WeightLayout("out_in", "out_in", 0)
    assert "plain winner at 1 row: out_in" in evidence and "1:in_out 2us/out_in 1us/slices 2us" in evidence


def test_a_kind_within_the_margin_does_not_displace_the_incumbent():
    layout, _ = choose(layout_times(in_out=0.95, out_in=1.0))  # 95 % of F.linear's time: not 10 % better
    assert layout == WeightLayout("out_in", "out_in", 0)


def test_a_winner_that_flips_with_the_row_count_keeps_both_copies_when_memory_allows():
    layout, evidence = choose(flipping_at_8_rows())
    assert layout == WeightLayout("slices", "in_out", 4)
    assert "slices beats out_in at 1 row (1us vs 2us)" in evidence and "both copies kept" in evidence


def test_without_room_for_a_second_copy_the_small_step_layout_serves_every_step():
    layout, evidence = choose(flipping_at_8_rows(), free_bytes=3 * linear_weight_bytes(CONFIG, torch.float32))
    assert layout == WeightLayout("slices", "slices", 0) and "does not fit comfortably; one layout" in evidence


def test_kinds_that_could_not_run_are_named_with_the_reason():
    timings = LayoutTimings(layout_times(in_out=2.0, out_in=1.0).times, {"panels": "no C++ compiler found"})
    assert "panels not tried: no C++ compiler found" in choose(timings)[1]


def test_a_kind_that_wins_only_inside_the_spread_across_tune_runs_does_not_displace_the_incumbent():
    from dataclasses import replace

    won = layout_times(in_out=0.7, out_in=1.0)  # 70 % of F.linear's time: kept on one start-up's timing
    assert choose(won)[0].small == "in_out"
    noisy = replace(won, spreads={m: {"in_out": 0.6, "out_in": 0.1} for m in ROWS})  # tune's runs varied by 60 %
    layout, evidence = choose(noisy)
    assert layout == WeightLayout("out_in", "out_in", 0)
    assert "spread across tune's runs by rows: 1:in_out 60%/out_in 10%" in evidence
