"""The outlier maths on stated data: MAD thresholds, the relative floor, majority verdicts, differing facts."""

from __future__ import annotations

import pytest

from bringup.probes.fleet.outliers import MAD_SCALE, beyond, find_outliers, mad_threshold, majority
from bringup.probes.fleet.result import FleetFault, FleetResult, judge
from bringup.probes.fleet.summary import RankSummary, StageResult


def rank(r: int, **fields) -> RankSummary:
    return RankSummary(rank=r, host=f"node{r // 2}", device=f"cuda:{r % 2}", profile=f"p{r}.yaml", **fields)


def test_mad_threshold_of_stated_figures():
    # median 100; deviations 0, 2, 2, 4, 60 -> MAD 2; 3.5 x 1.4826 x 2 = 10.378 > 10 % of 100
    t = mad_threshold("tflops", [100.0, 98.0, 102.0, 104.0, 40.0], k=3.5, min_deviation=0.10)
    assert t.median == 100.0 and t.mad == 2.0
    assert t.limit == pytest.approx(3.5 * MAD_SCALE * 2.0) == pytest.approx(10.3782)
    assert beyond(40.0, t, low_only=True) and not beyond(95.0, t, low_only=True)
    assert not beyond(130.0, t, low_only=True) and beyond(130.0, t, low_only=False)
    assert "3.5 x 1.4826 x MAD = 10.38" in t.rule and "10% of median = 10" in t.rule


def test_the_relative_floor_keeps_identical_ranks_from_flagging_noise():
    # MAD 0 (three identical ranks): without the floor any difference would be an outlier
    t = mad_threshold("gbps", [50.0, 50.0, 50.0, 48.0], k=3.5, min_deviation=0.10)
    assert t.mad == 0.0 and t.limit == pytest.approx(5.0)
    assert not beyond(48.0, t, low_only=True) and beyond(44.0, t, low_only=True)


def test_a_slow_rank_is_named_with_its_figure_and_only_it():
    figures = [200.0, 204.0, 25.0, 198.0]   # rank 2 eight times slower
    ranks = [rank(i, figures={"matmul GFLOP/s": v}) for i, v in enumerate(figures)]
    outliers, thresholds = find_outliers(ranks, k=3.5, min_deviation=0.10)
    assert [(o.rank, o.kind) for o in outliers] == [(2, "bench")]
    assert outliers[0].host == "node1" and outliers[0].figures["matmul GFLOP/s"]["value"] == 25.0
    assert thresholds["matmul GFLOP/s"].median == 199.0
    assert "matmul GFLOP/s 25 vs fleet median 199 (0.13x" in outliers[0].detail


def test_a_fast_rank_is_not_a_bench_outlier():
    ranks = [rank(i, figures={"triad GB/s": v}) for i, v in enumerate([10.0, 11.0, 10.5, 29.0])]
    assert find_outliers(ranks, k=3.5, min_deviation=0.10)[0] == []


def test_fewer_than_three_values_give_no_threshold():
    ranks = [rank(0, figures={"x": 1.0}), rank(1, figures={"x": 100.0})]
    outliers, thresholds = find_outliers(ranks, k=3.5, min_deviation=0.1)
    assert outliers == [] and thresholds == {}


def test_a_slow_link_is_named_on_its_sending_rank():
    ranks = [rank(0, links={"0->1": 20.0}), rank(1, links={"1->2": 21.0}), rank(2, links={"2->3": 5.0}),
             rank(3, links={"3->0": 19.5})]
    outliers, thresholds = find_outliers(ranks, k=3.5, min_deviation=0.10)
    assert [(o.rank, o.kind) for o in outliers] == [(2, "link")]
    assert "2->3 5 vs fleet median 19.75" in outliers[0].detail and "link GB/s" in thresholds


def test_links_have_their_own_floor_a_half_bandwidth_link_is_named_and_noise_is_not():
    def fleet(slow: float) -> list[RankSummary]:
        return [rank(0, links={"0->1": 7.3}), rank(1, links={"1->2": 7.5}), rank(2, links={"2->3": slow}),
                rank(3, links={"3->0": 7.4})]

    noisy, thresholds = find_outliers(fleet(4.9), k=3.5, min_deviation=0.10, link_min_deviation=0.40)
    assert noisy == [] and "40% of median" in thresholds["link GB/s"].rule
    assert [o.rank for o in find_outliers(fleet(4.9), k=3.5, min_deviation=0.10)[0]] == [2]  # the bench floor
    half, _ = find_outliers(fleet(3.6), k=3.5, min_deviation=0.10, link_min_deviation=0.40)
    assert [(o.rank, o.kind) for o in half] == [(2, "link")]


def test_an_op_verdict_that_differs_from_the_majority_is_named():
    ops = [{"softmax[float32] a": "pass", "silu[float32] b": "pass"}] * 3 + [
        {"softmax[float32] a": "fail", "silu[float32] b": "pass"}]
    outliers, _ = find_outliers([rank(i, ops=o) for i, o in enumerate(ops)], k=3.5, min_deviation=0.1)
    assert [(o.rank, o.kind) for o in outliers] == [(3, "ops")]
    assert outliers[0].figures == {"softmax[float32] a": {"value": "fail", "majority": "pass",
                                                          "ranks_with_majority": 3, "ranks": 4}}
    assert "softmax[float32] a: fail here, pass on 3 of 4 ranks" in outliers[0].detail


def test_a_capability_on_some_ranks_only_and_a_differing_driver_are_named():
    ranks = [rank(i, capabilities={"dtypes.bfloat16": "supported" if i != 1 else "unsupported"},
                  facts={"driver": "550.54" if i != 0 else "535.104", "torch": "2.5.1"}) for i in range(4)]
    outliers, _ = find_outliers(ranks, k=3.5, min_deviation=0.1)
    assert [(o.rank, o.kind) for o in outliers] == [(0, "environment"), (1, "capability")]
    assert "driver: 535.104 here, 550.54 on 3 of 4 ranks" in outliers[0].detail


def test_a_tie_has_no_majority_and_the_lowest_ranks_value_is_the_reference():
    assert majority({0: "a", 1: "b"}) is None and majority({0: "a", 1: "a", 2: "b"}) == "a"
    ranks = [rank(0, facts={"torch": "2.4"}), rank(1, facts={"torch": "2.5"})]
    outliers, _ = find_outliers(ranks, k=3.5, min_deviation=0.1)
    assert [(o.rank, o.kind) for o in outliers] == [(1, "environment")]


def test_ranks_without_a_section_are_not_compared_on_it():
    # rank 3 never got to verify-ops: it is not an ops outlier for every case it lacks
    ranks = [rank(i, ops={"silu[float32] b": "pass"}) for i in range(3)] + [rank(3)]
    assert find_outliers(ranks, k=3.5, min_deviation=0.1)[0] == []


def test_ranks_stopped_mid_stage_are_not_compared_on_what_they_reached():
    # rank 1 was killed during verify-ops and the others stopped wherever they were: rank 2 had passed two cases
    stopped = {"probe": StageResult(0, 1.0), "verify-ops": StageResult(-1, 2.0, "stopped")}
    reached = [{}, {}, {"silu[float32] b": "pass", "softmax[float32] a": "pass"}, {}]
    ranks = [rank(i, stages=stopped, ops=ops, capabilities={"c": "supported" if i == 0 else "unknown"})
             for i, ops in enumerate(reached)]
    assert find_outliers(ranks, k=3.5, min_deviation=0.1)[0] == []
    finished = {"probe": StageResult(0, 1.0), "verify-ops": StageResult(1, 2.0)}  # it found a failing case
    ranks = [rank(i, stages=finished, ops={"softmax[float32] a": "fail" if i == 3 else "pass"}) for i in range(4)]
    ranks[0] = rank(0, stages=stopped, ops={"softmax[float32] a": "pass"})
    assert [(o.rank, o.kind, o.figures["softmax[float32] a"]["ranks"]) for o in
            find_outliers(ranks, k=3.5, min_deviation=0.1)[0]] == [(3, "ops", 3)]


def test_a_clean_fleet_has_no_outlier():
    ranks = [rank(i, figures={"m": 100.0 + i}, links={f"{i}->{(i + 1) % 4}": 10.0 - 0.1 * i},
                  ops={"x": "pass"}, capabilities={"c": "supported"}, facts={"torch": "2.5"}, selftest="pass")
             for i in range(4)]
    assert find_outliers(ranks, k=3.5, min_deviation=0.1)[0] == []


def test_judge_adds_the_rank_that_died_as_a_fault_outlier():
    result = FleetResult(2, "fork", 1, 1.0, ["devices"], [rank(0), rank(1)],
                         faults=[FleetFault(1, "node0", "exited", "rank 1 was killed by signal SIGKILL", "probe"),
                                 FleetFault(0, "node0", "error", "peer gone", "probe", culprit=False)])
    judge(result, 3.5, 0.1)
    assert [(o.rank, o.kind) for o in result.outliers] == [(1, "fault")]
    assert result.failed and "exited (stage probe)" in result.outliers[0].detail
    again = FleetResult.from_dict(result.to_dict())
    assert again.outliers == result.outliers and again.faults == result.faults and again.ranks == result.ranks
