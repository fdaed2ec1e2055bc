"""The draft plan's workload-dependent choices are kept only where the served model's decode steps say so."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bringup.runner.engine import decode_timing
from bringup.runner.engine.decode_timing import alternated
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.plan.confirm import (
    COMPILED,
    EXPERTS,
    DecodeTimings,
    batch_limit,
    confirm_plan,
    fused_rows,
    knee,
    without_unused_compile,
)
from bringup.runner.plan.host_kernels import LAYOUT, PAGED
from bringup.runner.plan.plan import Choice, build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sources.builtin_model import builtin_config
from tests.runner.stated import stated

HOW = "stated as data"


def draft():
    plan = build_plan(ProfileFacts(None), "none", "cpu", builtin_config(), None, None)
    return replace(plan, compiled=Choice("inductor", "profile: 5 blocks 1.2x"),
                   attention=Choice(["paged_decode", "matmul_softmax"], "kernel faster on a synthetic step"),
                   weight_layout=Choice("panels", "start-up timing: panels 41us vs out_in 123us"))


def test_a_candidate_slower_on_this_model_is_replaced_by_its_plain_path():
    timings = DecodeTimings({COMPILED: (0.050, 0.010), PAGED: (0.0095, 0.010), LAYOUT: (0.0093, 0.010)}, how=HOW)
    plan = confirm_plan(draft(), timings, seqs_requested=True)
    assert plan.compiled.value is None
    assert plan.compiled.evidence.startswith("eager: compiled (inductor) not faster on this model: 50.00 ms vs "
                                             "10.00 ms plain per decode step (stated as data)")
    assert "profile said: profile: 5 blocks 1.2x" in plan.compiled.evidence
    assert plan.attention.value == ["matmul_softmax"]  # 95 % of the plain time: not under the 90 % margin
    assert plan.weight_layout.value == "out_in" and "panels not faster on this model" in plan.weight_layout.evidence


def test_a_candidate_faster_on_this_model_is_kept_and_says_so():
    timings = DecodeTimings({COMPILED: (0.005, 0.010), PAGED: (0.008, 0.010), LAYOUT: (0.004, 0.010)}, how=HOW)
    plan = confirm_plan(draft(), timings, seqs_requested=True)
    assert (plan.compiled.value, plan.attention.value[0], plan.weight_layout.value) == (
        "inductor", "paged_decode", "panels")
    for choice in (plan.compiled, plan.attention, plan.weight_layout):
        assert choice.evidence.startswith("confirmed on this model: ")


@pytest.mark.parametrize(("grouped_s", "kept_path"), [(0.020, "dense"), (0.0095, "dense"), (0.004, "grouped")])
def test_the_grouped_expert_path_is_kept_only_where_it_beats_every_expert_on_every_token(grouped_s, kept_path):
    moe_draft = replace(draft(), experts=Choice("grouped", "profile: moe_router, moe_group_tokens ... passed"))
    plan = confirm_plan(moe_draft, DecodeTimings({EXPERTS: (grouped_s, 0.010)}, how=HOW), seqs_requested=True)
    assert plan.experts.value == kept_path
    if kept_path == "dense":
        assert plan.experts.evidence.startswith(f"dense: grouped not faster on this model: {grouped_s * 1e3:.2f} ms "
                                                "vs 10.00 ms plain per decode step (stated as data)")
        assert "profile said: profile: moe_router" in plan.experts.evidence
    else:
        assert plan.experts.evidence.startswith("confirmed on this model: 4.00 ms vs 10.00 ms")


def test_a_candidate_that_could_not_be_timed_keeps_the_draft_and_says_why():
    plan = confirm_plan(draft(), DecodeTimings(skipped={LAYOUT: "no room for a second copy"}, how=HOW), True)
    assert plan.weight_layout.value == "panels"
    assert plan.weight_layout.evidence.endswith("not confirmed on this model: no room for a second copy")


def test_no_timings_leave_the_draft_as_it_is():
    assert confirm_plan(draft(), None, seqs_requested=False) == draft()


def test_the_batch_limit_is_the_knee_of_decode_tokens_per_second():
    by_batch = {1: 0.010, 2: 0.011, 4: 0.012, 8: 0.020, 16: 0.040}  # tokens/s 100, 182, 333, 400, 400
    choice = knee(by_batch)
    assert choice.value == 8 and "no larger batch gains 15% over 8" in choice.evidence
    slower_twice = DecodeTimings(by_batch={**by_batch, 16: 0.050}, by_batch_again={8: 0.020, 16: 0.050}, how=HOW)
    assert confirm_plan(draft(), slower_twice, seqs_requested=False).max_num_seqs.value == 8
    assert confirm_plan(draft(), DecodeTimings(by_batch=by_batch, how=HOW), seqs_requested=True
                        ).max_num_seqs == draft().max_num_seqs  # the caller's limit stands
    still_growing = knee({1: 0.01, 2: 0.01, 4: 0.01})
    assert still_growing.value == 4 and "still grew at the largest batch timed" in still_growing.evidence


def test_a_flat_doubling_between_two_gains_does_not_end_the_search():
    by_batch = {1: 0.010, 2: 0.011, 4: 0.012, 8: 0.024, 16: 0.026, 32: 0.050}  # 8 no faster than 4, then 16 is
    choice = knee(by_batch)
    assert choice.value == 16 and "no larger batch gains 15% over 16" in choice.evidence


class StatedSteps:
    """Decode-step seconds stated per batch size (and per candidate switch), counted like DecodeSteps counts them."""

    def __init__(self, by_batch: dict[int, float], capacity: int = 256) -> None:
        self.by_batch, self.capacity, self.timed_s, self.asked = by_batch, capacity, 0.0, []

    def max_batch(self, plan) -> int:
        return self.capacity

    def seconds(self, batch: int) -> float:
        self.asked.append(batch)
        self.timed_s += decode_timing.STEPS * self.by_batch[batch]
        return self.by_batch[batch]


def test_the_sweep_goes_on_past_one_flat_doubling_and_stops_at_a_plateau():
    rates = {1: 100, 2: 190, 4: 360, 8: 370, 16: 700, 32: 720, 64: 730, 128: 2000}
    steps = StatedSteps({b: b / r for b, r in rates.items()})
    by_batch = decode_timing.sweep_batches(steps, draft())
    assert list(by_batch) == [1, 2, 4, 8, 16, 32, 64]  # 8 flat, 16 gains again; 32 and 64 both flat: a plateau
    assert knee(by_batch).value == 16


def test_the_sweep_stops_at_the_cache_capacity_and_its_time_budget():
    steps = StatedSteps({b: 0.001 * b**0.5 for b in (1, 2, 4, 8, 16)}, capacity=8)
    assert list(decode_timing.sweep_batches(steps, draft())) == [1, 2, 4, 8]
    slow = StatedSteps({1: 0.4, 2: 0.4, 4: 0.4})  # 6 steps of 0.4 s each: the budget is spent after two sizes
    assert list(decode_timing.sweep_batches(slow, draft())) == [1, 2]


def test_a_candidate_and_its_plain_path_are_timed_in_turn_and_the_best_of_each_kept():
    state, order = {"on": False}, []
    times = iter([0.020, 0.012, 0.011, 0.013, 0.030, 0.040, 0.050, 0.060])  # plain first: it ran cold

    class Steps:
        def seconds(self, batch: int) -> float:
            order.append(state["on"])
            return next(times)

    assert alternated(Steps(), lambda on: state.update(on=on)) == (0.012, 0.011)
    assert order == [False, True] * decode_timing.ROUNDS


def test_the_engine_runs_what_the_confirmed_plan_kept(tmp_path):
    slower = DecodeTimings({PAGED: (0.02, 0.01)}, how=HOW)
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=64,
                                            max_num_seqs=2, measurements=stated(paged_decode=(True, "stated"),
                                                                                decode=slower)))
    assert engine.plan.attention.value == ["matmul_softmax"]
    assert engine.executor.model.decode_attend is None and engine.executor.plan is engine.plan


@pytest.mark.slow
def test_an_engine_measuring_for_itself_confirms_on_the_served_model(tmp_path):
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=256))
    assert "on this model" in engine.plan.max_num_seqs.evidence  # the knee, measured at start-up
    assert engine.scheduler.max_num_seqs == engine.plan.max_num_seqs.value
    attention = engine.plan.attention.evidence
    if "paged_decode" in attention and "paged_decode not used:" not in attention:  # the start-up check passed it
        assert "on this model" in attention
    if engine.plan.weight_layout.value.split()[0] != "out_in":  # decode steps run on a candidate layout
        assert "on this model" in engine.plan.weight_layout.evidence  # confirmed, or why it could not be


def test_a_compiled_forward_that_would_never_run_is_not_built():
    fused = replace(draft(), decode_layers=Choice("fused", "confirmed on this model"))
    plan = without_unused_compile(fused, fused_serves_every_decode_step=True)
    assert plan.compiled.value is None
    assert plan.compiled.evidence.startswith("eager: the fused decode layers serve every decode step, so a compiled "
                                             "forward (inductor) would never run; profile said: profile: 5 blocks")
    assert without_unused_compile(fused, fused_serves_every_decode_step=False).compiled.value == "inductor"
    assert without_unused_compile(draft(), fused_serves_every_decode_step=True).compiled.value == "inductor"


# ------------------------------------------------------------------ no choice made from noise (issue 25)
def test_a_knee_below_the_default_with_larger_batches_not_slower_leaves_the_default():
    by_batch = {1: 0.010, 2: 0.011, 4: 0.012, 8: 0.020, 16: 0.040}  # 8 and 16 both 400 tokens/s: a plateau
    choice = confirm_plan(draft(), DecodeTimings(by_batch=by_batch, how=HOW), seqs_requested=False).max_num_seqs
    assert choice.value == draft().max_num_seqs.value == 16
    assert choice.evidence.startswith("default 16 stands: measured on this model, the knee at 8 is not "
                                      "distinguishable from noise")


def test_a_batch_limit_below_the_default_needs_larger_batches_slower_beyond_the_spread_in_both_passes():
    by_batch = {1: 0.010, 2: 0.030, 4: 0.060}  # tokens/s 100, 67, 67: batch 1 is the knee
    once = DecodeTimings(by_batch=by_batch, memory_batch=4, how=HOW)
    assert batch_limit(once, 16).value == 4  # slower in one pass only: what memory allows (4 < 16) stands
    twice = replace(once, by_batch_again={1: 0.010, 2: 0.029, 4: 0.061})
    assert batch_limit(twice, 16).value == 1
    assert "measured slower beyond the spread (0%) in two passes" in batch_limit(twice, 16).evidence
    noisy = replace(twice, batch_spreads={1: 0.5, 2: 0.9, 4: 0.2})  # steps at batch 2 varied by 90 %
    assert batch_limit(noisy, 16).value == 4
    assert "not distinguishable from noise (spread 90%" in batch_limit(noisy, 16).evidence
    faster_again = replace(twice, by_batch_again={1: 0.010, 2: 0.015, 4: 0.030})  # the second pass says otherwise
    assert batch_limit(faster_again, 16).value == 4


def test_a_kernel_that_wins_inside_the_spread_gives_way_to_the_plain_path():
    timings = DecodeTimings({PAGED: (0.008, 0.010)}, spreads={PAGED: 0.3}, how=HOW)  # 80 % of plain, spread 30 %
    plan = confirm_plan(draft(), timings, seqs_requested=True)
    assert plan.attention.value == ["matmul_softmax"]
    assert plan.attention.evidence.startswith("paged_decode not distinguishable from noise on this model (spread "
                                              "30%): 8.00 ms vs 10.00 ms plain per decode step")
    quiet = replace(timings, spreads={PAGED: 0.05})
    assert confirm_plan(draft(), quiet, seqs_requested=True).attention.value[0] == "paged_decode"


def test_the_second_pass_times_the_knee_and_larger_batches_only_when_the_knee_is_below_the_floor():
    steps = StatedSteps({1: 0.010, 2: 0.030, 4: 0.060})
    assert decode_timing.second_pass(steps, {1: 0.010, 2: 0.030, 4: 0.060}, floor=16) == {1: 0.010, 2: 0.030,
                                                                                           4: 0.060}
    assert steps.asked == [1, 2, 4]
    assert decode_timing.second_pass(steps, {1: 0.010, 2: 0.010}, floor=2) == {}  # the knee (2) is the floor
    assert steps.asked == [1, 2, 4]


def test_tune_combines_runs_into_their_fastest_with_the_floor_noise_across_runs():
    from bringup.runner.plan.record.tune_runs import combine
    from tests.runner.stated import layout_times, stated

    runs = [stated(layouts=layout_times(in_out=us, out_in=1.0),
                   decode=DecodeTimings({PAGED: (c, 0.010)}, by_batch={1: b}, spreads={PAGED: 0.05}, how=HOW,
                                        cpu_share=share))
            for us, c, b, share in ((2.0, 0.006, 0.010, 0.98), (3.0, 0.008, 0.012, 0.64), (4.0, 0.009, 0.011, 0.97))]
    combined, noise = combine(runs)
    assert combined.layouts.times[1] == {"in_out": 2.0e-6, "out_in": 1.0e-6}
    assert combined.layouts.spreads[1]["in_out"] == pytest.approx(1 / 2)  # the two fastest: 2 and 3 us
    assert combined.decode.candidates[PAGED] == (0.006, 0.010)
    assert combined.decode.spreads[PAGED] == pytest.approx(2 / 6)  # across the runs, above each run's own 5 %
    assert combined.decode.by_batch == {1: 0.010} and noise["batch 1"] == pytest.approx(1 / 10)
    assert combined.decode.cpu_share == 0.64  # the most contended run's
    assert "fastest of 3 start-up runs" in combined.decode.how


# ------------------------------------------------------------------ the fused decode layers past the layout's switch
def test_the_fused_decode_layers_serve_up_to_the_largest_batch_they_won_in_a_row():
    fused = replace(draft(), decode_layers=Choice("fused", "every layer of a decode step in one host-kernel call"))
    won_then_lost = DecodeTimings(how=HOW, fused_rows={64: (0.058, 0.072), 128: (0.1106, 0.1096)})
    assert fused_rows(won_then_lost) == 64
    evidence = confirm_plan(fused, won_then_lost, seqs_requested=True).decode_layers.evidence
    assert evidence.startswith("serves decode steps of up to 64 sequences (past the layout's switch, by batch: fused "
                               "vs the modules per decode step, 64: 58.00 ms vs 72.00 ms, 128: 110.60 ms vs 109.60 ms)")
    noisy = DecodeTimings(how=HOW, fused_rows={64: (0.058, 0.072)}, fused_rows_spreads={64: 0.30})
    assert fused_rows(noisy) == 0  # a win inside the noise does not count
    assert "serves the layout's small steps" in confirm_plan(fused, noisy, seqs_requested=True).decode_layers.evidence
    lost_first = DecodeTimings(how=HOW, fused_rows={64: (0.08, 0.072), 128: (0.05, 0.10)})
    assert fused_rows(lost_first) == 0  # doubling stops at the first loss: a later win is never reached
    modules = confirm_plan(draft(), won_then_lost, seqs_requested=True).decode_layers
    assert "serves" not in modules.evidence  # the modules serve decode steps: nothing to say about the kernel's rows
