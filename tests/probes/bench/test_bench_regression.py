"""Baseline comparison on synthetic profiles: ratio, noise-aware significance, regressions."""

from __future__ import annotations

from bringup.profiles.bench_diff import diff_bench, regressions
from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection


def record(key: str, median: float, iqr: float, status: str = "ok") -> BenchRecord:
    if status != "ok":
        return BenchRecord(key=key, name="k", status=status, reason="test")
    return BenchRecord(key=key, name="k", median_s=median, iqr_s=iqr, min_s=median * 0.9, reps=10, noisy=False)


def section(**groups: list[BenchRecord]) -> BenchSection:
    return BenchSection(groups={name: BenchGroup(records=records) for name, records in groups.items()})


BASELINE = section(
    matmul=[record("steady", 1.0, 0.01), record("noisy", 1.0, 0.30), record("better", 1.0, 0.01),
            record("same", 1.0, 0.02), record("gone", 1.0, 0.01), record("broken", 1.0, 0.01)],
)
CURRENT = section(
    matmul=[record("steady", 1.3, 0.013), record("noisy", 1.3, 0.39), record("better", 0.5, 0.005),
            record("same", 1.01, 0.02), record("broken", 0.0, 0.0, status="error"), record("new", 1.0, 0.01)],
)


def rows_by_key():
    return {row["key"]: row for row in diff_bench(BASELINE, CURRENT)}


def test_ratio_and_noise_are_computed_per_measurement():
    steady = rows_by_key()["steady"]
    assert abs(steady["ratio"] - 1.3) < 1e-12
    assert abs(steady["change_pct"] - 30.0) < 1e-9
    assert abs(steady["noise_pct"] - 2.01) < 1e-9  # bands of 1 % and 1 %: 1.01 x 1.01
    assert steady["verdict"] == "slower" and steady["significant"]
    assert abs(steady["beyond_noise_pct"] - (1.3 / 1.0201 - 1) * 100) < 1e-9  # 27.44 %


def test_a_change_inside_the_noise_is_not_significant():
    rows = rows_by_key()
    assert rows["noisy"]["verdict"] == "same" and not rows["noisy"]["significant"]  # 30 % change, 69 % noise
    assert rows["same"]["verdict"] == "same"
    assert rows["better"]["verdict"] == "faster"


def test_added_removed_and_not_comparable_are_reported():
    rows = rows_by_key()
    assert rows["new"]["verdict"] == "added"
    assert rows["gone"]["verdict"] == "removed"
    assert rows["broken"]["verdict"] == "not comparable"


def test_regressions_beyond_noise_and_threshold():
    rows = diff_bench(BASELINE, CURRENT)
    assert [r["key"] for r in regressions(rows, 10.0)] == ["steady"]
    assert regressions(rows, 27.5) == []  # 30 % slower, 2.01 % noise: 27.44 % beyond noise
    assert [r["key"] for r in regressions(rows, 27.4)] == ["steady"]


def test_a_large_speed_up_is_significant_even_for_very_noisy_runs():
    a = section(d=[record("x", 1.0, 3.0)])  # IQR three times the median
    b = section(d=[record("x", 0.001, 0.003)])
    (row,) = diff_bench(a, b)
    assert row["verdict"] == "faster" and row["noise_pct"] == 1500.0


def test_missing_sections_compare_as_added_or_removed():
    assert {r["verdict"] for r in diff_bench(None, CURRENT)} == {"added"}
    assert {r["verdict"] for r in diff_bench(BASELINE, None)} == {"removed"}
    assert diff_bench(None, None) == []


def test_measurements_sized_differently_compare_by_rate_not_time():
    def sized(array_bytes: int, median: float, gbps: float) -> BenchSection:
        rec = BenchRecord(key="copy float32", name="copy", median_s=median, iqr_s=median * 0.01, min_s=median,
                          reps=10, noisy=False, gbps=gbps, params={"array_bytes": array_bytes})
        return BenchSection(groups={"bandwidth": BenchGroup(records=[rec])})

    # 10x the bytes in 4x the time: the second run streams 2.5x faster although its time is longer
    row = diff_bench(sized(10**8, 0.010, 20.0), sized(10**9, 0.040, 50.0))[0]
    assert row["verdict"] == "faster" and abs(row["ratio"] - 0.4) < 1e-9
    assert (row["rate_unit"], row["a_rate"], row["b_rate"]) == ("GB/s", 20.0, 50.0)
    same_size = diff_bench(sized(10**8, 0.010, 20.0), sized(10**8, 0.040, 5.0))[0]
    assert same_size["verdict"] == "slower" and abs(same_size["ratio"] - 4.0) < 1e-9 and "rate_unit" not in same_size
