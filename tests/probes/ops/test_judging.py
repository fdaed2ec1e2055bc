import math

import torch

from bringup.probes.ops.guard import guarded_output
from bringup.probes.ops.judge.metrics import compare_tensor
from bringup.probes.ops.judge.statistics import judge_multinomial
from bringup.probes.ops.judge.tolerances import TABLE, exact, tolerance_for


def test_metrics_report_error_nmse_and_worst_index():
    ref = torch.linspace(1, 2, 12, dtype=torch.float64).reshape(3, 4)
    out = ref.to(torch.float32).clone()
    out[2, 1] += 0.01
    comp = compare_tensor(out, ref, tolerance_for("float32", 1, 0.0))
    assert not comp.passed and comp.worst_index == [2, 1]
    assert math.isclose(comp.max_abs, 0.01, rel_tol=1e-4)
    assert math.isclose(comp.nmse, 0.01**2 / float(ref.pow(2).sum()), rel_tol=1e-3)
    ok = compare_tensor(ref.to(torch.float32), ref, tolerance_for("float32", 1, 0.0))
    assert ok.passed and ok.max_rel < 1e-7


def test_non_finite_in_the_wrong_place_fails_and_overflow_to_inf_is_right():
    ref = torch.tensor([1.0, 70000.0, float("nan")], dtype=torch.float64)
    good = torch.tensor([1.0, float("inf"), float("nan")], dtype=torch.float16)  # 70000 overflows float16
    assert compare_tensor(good, ref, tolerance_for("float16", 1, 0.0)).passed
    bad = torch.tensor([float("nan"), float("inf"), float("nan")], dtype=torch.float16)
    comp = compare_tensor(bad, ref, tolerance_for("float16", 1, 0.0))
    assert not comp.passed and comp.worst_index == [0] and "non-finite" in comp.problems[0]


def test_exact_results_and_integer_outputs():
    ref = torch.tensor([3, 1, 2])
    assert compare_tensor(torch.tensor([3, 1, 2]), ref, exact()).passed
    comp = compare_tensor(torch.tensor([3, 2, 2]), ref, exact())
    assert not comp.passed and comp.worst_index == [1]


def test_tolerance_table_has_reasons_and_scales_with_accumulation():
    for row in TABLE.values():
        assert row.reason and row.rtol > 0
    assert TABLE["float32"].rtol == 1.3e-6 and TABLE["bfloat16"].rtol == 1.6e-2  # torch.testing floors
    short, long = tolerance_for("bfloat16", 64, 1.0), tolerance_for("bfloat16", 16384, 1.0)
    assert short.rtol == TABLE["bfloat16"].rtol and long.rtol == TABLE["bfloat16"].rtol * 8
    assert "K=16384" in long.reason


def test_guard_region_detects_a_write_past_the_output():
    guarded = guarded_output(torch.Size([4, 5]), torch.float32, torch.device("cpu"))
    torch.exp(torch.zeros(4, 5), out=guarded.view)
    assert guarded.touched() == []
    torch.as_strided(guarded.view, (21,), (1,), guarded.view.storage_offset())[20].fill_(0)
    assert guarded.touched() == ["after"]


def test_chi_square_accepts_the_sampler_and_rejects_a_biased_one():
    probs = torch.tensor([0.1, 0.2, 0.0, 0.3, 0.4], dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    draws = torch.multinomial(probs, 100000, replacement=True, generator=gen)
    assert judge_multinomial(draws, probs, replacement=True).passed
    skewed = torch.multinomial(torch.tensor([0.12, 0.18, 0.0, 0.3, 0.4]), 100000, replacement=True, generator=gen)
    verdict = judge_multinomial(skewed, probs, replacement=True)
    assert not verdict.passed and verdict.statistic > verdict.critical
    zero_hit = draws.clone()
    zero_hit[0] = 2
    assert "probability 0" in judge_multinomial(zero_hit, probs, replacement=True).problems[0]


def test_input_mutation_is_detected_and_nan_inputs_are_not_false_alarms():
    from bringup.probes.ops.inputs import changed_inputs, snapshot

    x = torch.tensor([1.0, float("nan"), 3.0])
    idx = torch.tensor([0, 1])
    before = snapshot([x, idx, 2.0])
    assert changed_inputs([x, idx, 2.0], before) == []
    x[0] = 5.0
    assert changed_inputs([x, idx, 2.0], before) == [0]
