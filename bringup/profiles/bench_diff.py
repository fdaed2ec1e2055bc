"""Compare two bench sections measurement by measurement, with the two runs' noise in mind.

For each (group, key) measured in both: ratio = time in b / time in a (> 1: b is slower) and
change_pct = (ratio - 1) x 100. Each run's noise is its IQR/median r, taken as a multiplicative
band [median / (1 + r), median x (1 + r)] (symmetric in log space, never negative); the two bands
together give noise factor (1 + r_a)(1 + r_b), noise_pct = (factor - 1) x 100. b is significantly
slower when ratio > factor, faster when ratio < 1 / factor, else the same.
beyond_noise_pct = (ratio / factor - 1) x 100 for slower (factor / ratio - 1 for faster): how much
of the change is left after giving both runs their noise. `regressions(rows, pct)` keeps the rows
slower by more than pct beyond noise.
"""

from __future__ import annotations

from typing import Any

from bringup.profiles.sections.bench import BenchRecord, BenchSection


def relative_iqr(record: BenchRecord) -> float:
    if record.median_s and record.iqr_s is not None:
        return record.iqr_s / record.median_s
    return 0.0


def keyed(section: BenchSection | None) -> dict[tuple[str, str], BenchRecord]:
    if section is None:
        return {}
    return {(group, r.key): r for group, found in section.groups.items() for r in found.records}


RATES = (("gbps", "GB/s"), ("tflops", "TFLOP/s"))


def shared_rate(a: BenchRecord, b: BenchRecord) -> tuple[str, float, float] | None:
    """(unit, a's rate, b's rate) when both records report the same rate: the fair comparison when the two
    runs sized the measurement differently (bandwidth arrays follow the machine's memory and caches)."""
    for attribute, unit in RATES:
        rate_a, rate_b = getattr(a, attribute), getattr(b, attribute)
        if rate_a and rate_b:
            return unit, rate_a, rate_b
    return None


def compare_records(group: str, key: str, a: BenchRecord, b: BenchRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"group": group, "key": key, "name": b.name, "dtype": b.dtype,
                           "a_median_s": a.median_s, "b_median_s": b.median_s}
    rate = shared_rate(a, b) if a.params != b.params else None  # the same work: times compare directly
    if rate:
        row.update(rate_unit=rate[0], a_rate=rate[1], b_rate=rate[2])
    if a.status != "ok" or b.status != "ok" or not a.median_s or not b.median_s:
        row.update(verdict="not comparable", significant=False,
                   reason=f"status {a.status} vs {b.status}" if a.status != "ok" or b.status != "ok"
                   else "missing time")
        return row
    ratio = rate[1] / rate[2] if rate else b.median_s / a.median_s  # > 1: b takes longer per unit of work
    factor = (1.0 + relative_iqr(a)) * (1.0 + relative_iqr(b))
    if ratio > factor:
        verdict, beyond = "slower", (ratio / factor - 1.0) * 100.0
    elif ratio < 1.0 / factor:
        verdict, beyond = "faster", (1.0 / (ratio * factor) - 1.0) * 100.0
    else:
        verdict, beyond = "same", 0.0
    row.update(ratio=ratio, change_pct=(ratio - 1.0) * 100.0, noise_pct=(factor - 1.0) * 100.0,
               significant=verdict != "same", verdict=verdict, beyond_noise_pct=beyond,
               noisy=bool(a.noisy or b.noisy))
    return row


def diff_bench(a: BenchSection | None, b: BenchSection | None) -> list[dict[str, Any]]:
    """Rows for every measurement in a or b (a: before / baseline, b: after / current)."""
    before, after = keyed(a), keyed(b)
    rows: list[dict[str, Any]] = []
    for group, key in list(before) + [k for k in after if k not in before]:
        old, new = before.get((group, key)), after.get((group, key))
        if old is None or new is None:
            present = new if old is None else old
            rows.append({"group": group, "key": key, "name": present.name, "dtype": present.dtype,
                         "a_median_s": old.median_s if old else None,
                         "b_median_s": new.median_s if new else None,
                         "verdict": "added" if old is None else "removed", "significant": False})
            continue
        rows.append(compare_records(group, key, old, new))
    return rows


def regressions(rows: list[dict[str, Any]], pct: float) -> list[dict[str, Any]]:
    """Rows where b is slower than a by more than pct percent beyond the two runs' noise."""
    return [r for r in rows if r.get("verdict") == "slower" and r.get("beyond_noise_pct", 0.0) > pct]
