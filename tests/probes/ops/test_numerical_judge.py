"""The numerical judge on real kernels: legal rounding orders pass, biased and faulty kernels fail (CPU).

The kernels (tests/probes/ops/numeric_kernels.py) replace aten's CPU kernels for the dtypes under test only, so the
float64 reference stays exact, as it would beside a device's kernel.
"""

import math
from collections import defaultdict

import pytest
import torch

from bringup.probes.ops.catalog import load_catalog, select_cases
from bringup.probes.ops.execute import run_case
from bringup.probes.ops.judge.arithmetic import Arithmetic
from bringup.probes.ops.judge.bias import MIN_CLUSTERS, Z_BIAS, bias_test
from bringup.probes.ops.judge.bounds import error_bound
from bringup.probes.ops.judge.roundoff import growth
from tests.probes.ops import numeric_kernels as nk

DTYPES = ("float32", "bfloat16", "float16")


def _records(ops, dtypes):
    catalog = load_catalog()
    return [run_case(key, catalog, torch.device("cpu")) for key in select_cases(catalog, ops=list(ops),
                                                                                  dtypes=list(dtypes))]


@pytest.mark.parametrize("aten_op", sorted(nk.LEGAL))
def test_legal_rounding_orders_pass_every_case(aten_op, override_cpu_kernel):
    override_cpu_kernel(aten_op, nk.LEGAL[aten_op])
    records = _records(nk.LEGAL_OPS[aten_op], DTYPES)
    assert records and [(r.op, r.dtype, r.case, r.message) for r in records if r.status != "pass"] == []


@pytest.mark.parametrize(("aten_op", "dtype", "factor"), [
    (name, dtype, 1 + 1e-4 if dtype == "float32" else 1.005) for name in sorted(nk.ACCURATE) for dtype in DTYPES])
def test_biased_kernels_fail_in_every_family(aten_op, dtype, factor, override_cpu_kernel):
    kernel, ops = nk.ACCURATE[aten_op]
    override_cpu_kernel(aten_op, nk.scaled(kernel, factor))
    failed = defaultdict(list)
    for r in _records(ops, (dtype,)):
        if r.status != "pass":
            failed[r.op].append(r)
    assert set(failed) == set(ops)
    for record in (r for records in failed.values() for r in records):
        assert record.decided_by in ("bias", "bound")
        # the scale found is the one injected, within three of its standard errors and a fifth (the rounding of
        # the scaled result adds a systematic part of its own)
        standard_error = abs(record.bias / record.bias_z)
        assert abs(record.bias - (factor - 1)) <= 0.2 * abs(factor - 1) + 3 * standard_error


def test_accurate_kernels_pass(override_cpu_kernel):
    """The kernels the biased variants scale are right themselves: the failures above are the scale's."""
    for aten_op in ("cumsum", "mm", "_softmax", "native_layer_norm"):
        override_cpu_kernel(aten_op, nk.ACCURATE[aten_op][0])
    records = _records(("cumsum", "matmul", "softmax", "layer_norm"), DTYPES)
    assert records and [(r.op, r.dtype, r.case) for r in records if r.status != "pass"] == []


@pytest.mark.parametrize("fault", nk.FAULTS, ids=[f[0] for f in nk.FAULTS])
def test_every_injected_kernel_fault_is_caught(fault, override_cpu_kernel):
    _, aten_op, kernel, ops, dtype = fault
    override_cpu_kernel(aten_op, kernel)
    records = _records(ops, (dtype,))
    assert any(r.status == "fail" for r in records)


def test_records_keep_the_error_the_bound_the_bias_and_the_deciding_test():
    record = next(r for r in _records(("sum",), ("bfloat16",)) if r.case == "[4,128,1024] dim=-1")
    assert record.status == "pass" and record.decided_by == "bound and bias"
    assert 0 < record.max_abs <= record.bound / record.bound_ratio * 1.0000001
    assert record.bound_ratio < 1 and abs(record.bias_z) < Z_BIAS and abs(record.bias) < 2.0**-8
    assert record.rtol is None and record.atol is None  # tolerances only for ops without an arithmetic rule



def test_where_n_u_reaches_1_the_tolerance_decides_and_every_figure_is_finite(tmp_path):
    """softmax over a 32,000-entry vocabulary in bfloat16: gamma_n has no finite value, so no bound is recorded
    (a profile with an infinite figure would not load again): the tolerance table decides, with the bias test."""
    from bringup.profiles.store import load_profile, render_yaml, write_atomically
    from tests.report.sample import full_profile

    records = [r for r in _records(("softmax",), ("bfloat16", "float16")) if "32000" in r.case]
    assert records and all(r.status == "pass" and r.rtol is not None for r in records)
    assert all(math.isfinite(figure) for r in records for figure in (r.bound, r.bound_ratio, r.bias, r.bias_z))
    assert all(r.decided_by.startswith("tolerance") for r in records)
    path = tmp_path / "p.yaml"
    write_atomically(path, render_yaml(full_profile().model_copy(update={"ops": records})))
    assert [r.case_id for r in load_profile(path).ops] == [r.case_id for r in records]

def _stored_partials_sum(x: torch.Tensor) -> torch.Tensor:
    acc = torch.zeros(x.shape[:-1], dtype=x.dtype)
    for i in range(x.shape[-1]):
        acc = acc + x[..., i]  # rounded to the dtype after every step
    return acc


def test_the_bound_holds_a_sum_whose_partials_are_stored_in_bfloat16():
    x = torch.randn(64, 300, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(torch.bfloat16)
    x64 = x.to(torch.float64)
    reference = x64.sum(-1)
    bound = error_bound(Arithmetic("sum", lambda t: t.sum(-1), [x64]), reference, torch.bfloat16)
    error = (_stored_partials_sum(x).to(torch.float64) - reference).abs()
    assert bool((error <= bound).all()) and float(error.max()) > 2.0**-8 * float(reference.abs().max())
    # gamma_n * sum|x| plus the output's rounding, exactly as Higham's (4.4) states it
    first = growth(300, 2.0**-8) * x64.abs().sum(-1)
    assert torch.allclose(bound, first + 2.0**-8 * (reference.abs() + first), rtol=1e-6)


def test_bias_statistic_separates_scale_errors_from_rounding_noise():
    gen = torch.Generator().manual_seed(5)
    reference = torch.randn(4096, generator=gen, dtype=torch.float64)
    rounded = reference.to(torch.bfloat16).to(torch.float64)
    noise = bias_test(rounded, reference, 2.0**-8)
    assert noise.decides and abs(noise.z) < 4
    biased = bias_test((reference * 1.005).to(torch.bfloat16).to(torch.float64), reference, 2.0**-8)
    assert biased.biased and biased.z > 10 * Z_BIAS and biased.scale_error == pytest.approx(0.005, rel=0.05)
    single = bias_test((reference * (1 + 1e-4)).to(torch.float32).to(torch.float64), reference, 2.0**-24)
    assert single.biased


def test_bias_test_does_not_decide_on_few_independent_outputs():
    reference = torch.linspace(1, 2, MIN_CLUSTERS - 1, dtype=torch.float64)
    result = bias_test(reference * 1.5, reference, 2.0**-8)
    assert not result.decides and not result.biased and result.z > Z_BIAS
    rows = torch.linspace(1, 2, 4 * 100, dtype=torch.float64).reshape(4, 100)
    assert bias_test(rows * 1.5, rows, 2.0**-8, row_dim=-1).clusters == 4


def test_a_scan_is_judged_by_its_increments():
    gen = torch.Generator().manual_seed(7)
    steps = torch.randn(8, 500, generator=gen, dtype=torch.float64)
    reference = steps.cumsum(-1)
    # each step's rounding carried into every later output: correlated along the scan, unbiased step by step
    wobble = torch.rand(8, 500, generator=gen, dtype=torch.float64) - 0.5
    carried = (steps + 2.0**-8 * steps.abs() * wobble).cumsum(-1)
    assert not bias_test(carried, reference, 2.0**-8, scan_dim=-1).biased
    assert bias_test(reference * 1.01, reference, 2.0**-8, scan_dim=-1).biased


def test_a_recorded_failure_is_rejudged_from_its_figures_and_only_its_block_rewritten(tmp_path):
    from pathlib import Path

    from bringup.probes.ops.judge.rejudge import main, rejudged
    from bringup.profiles.store import load_profile

    h200 = Path(__file__).parents[3] / "reference" / "profiles" / "nvidia-h200-sxm-torch2.11-cu130.yaml"
    text = h200.read_text(encoding="utf-8")
    record = next(r for r in load_profile(h200).ops if r.op == "cumsum" and r.dtype == "bfloat16"
                  and r.case == "odd [37,131] dim=0")
    as_recorded = record.model_copy(update={"status": "fail", "rtol": 0.016, "atol": 0.07706845270340376,
                                            "bound": None, "bound_ratio": None, "decided_by": None})
    catalog = load_catalog()
    again = rejudged(as_recorded, catalog)
    assert again.status == "pass" and again.bound_ratio == pytest.approx(record.bound_ratio)  # as committed
    assert again.bound_ratio < 0.1
    assert rejudged(as_recorded.model_copy(update={"max_abs": 50.0}), catalog) is None  # beyond the bound: stays
    copy = tmp_path / "h200.yaml"
    copy.write_text(text, encoding="utf-8")
    assert main([str(copy)]) == 0 and copy.read_text(encoding="utf-8") == text  # nothing left to re-judge
    assert main([str(tmp_path / "missing.yaml")]) == 2
