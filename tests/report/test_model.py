"""Report data from a profile: the op × dtype matrix, bench tables, plan, fallbacks."""

from __future__ import annotations

from bringup.profiles.store import load_profile
from bringup.report.model import build_report
from bringup.report.sections.ops_matrix import op_matrix
from tests.report.sample import REFERENCE_PROFILES, full_profile, ops_records


def test_matrix_counts_and_worst_status_per_cell():
    matrix = op_matrix(ops_records(failing=3))
    cells = dict(matrix.rows)
    assert matrix.dtypes == ["float32", "bfloat16", "float8_e4m3fn"]
    assert cells["rms_norm"]["bfloat16"].status == "fail" and cells["rms_norm"]["bfloat16"].summary() == "0/3 (3 fail)"
    assert cells["softmax"]["float32"].summary() == "1/1"
    assert cells["float8_mm"]["float8_e4m3fn"].status == "unsupported"
    assert cells["rms_norm"]["bfloat16"].failing == [0, 1, 2] and len(matrix.failing) == 3


def test_skipped_bench_records_are_grouped_by_reason_not_listed_as_rows():
    profile = load_profile(REFERENCE_PROFILES / "cpu-amd-epyc-2core-avx512-bf16.yaml")
    report = build_report(profile, "p.yaml")
    ops = next(t for t in report.bench if t.group == "ops")
    recorded = profile.bench.records("ops")
    assert len(ops.rows) == sum(r.status in ("ok", "error") for r in recorded)
    assert sum(len(group.keys) for group in ops.skipped) == sum(r.status not in ("ok", "error") for r in recorded)
    assert len(ops.skipped) <= len({r.reason for r in recorded})


def test_plan_fallbacks_and_selftest_come_from_the_profile():
    report = build_report(full_profile(), "p.yaml")
    settings = {row.setting: row.value for row in report.plan.rows}
    assert settings["dtype"] == "float32"  # bfloat16 op cases failed in the sample, so the plan keeps float32
    assert report.plan.ran_with == {"dtype": "bfloat16", "compiled": "eager"}
    assert sum(row.count for row in report.fallbacks) == 1
    assert any(fact.label == "status" and fact.value == "pass" for fact in report.selftest)


def test_environment_topics_recorded_by_bringup_env_are_shown_when_present():
    profile = full_profile()
    profile.environment.accelerators = {"cuda runtime": "12.4"}
    facts = {fact.label: fact.value for fact in build_report(profile, "p.yaml").environment}
    assert facts["accelerators: cuda runtime"] == "12.4"
