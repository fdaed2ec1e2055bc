"""Compare two bench sections measurement by measurement, with the two runs' noise in mind.

For each (group, key) measured in both: ratio = time in b / time in a (> 1: b is slower),
change_pct = (ratio - 1) x 100, and noise_pct = 100 x (IQR/median of a + IQR/median of b). A change
is significant when |change_pct| exceeds noise_pct; verdict is slower / faster / same.
`regressions(rows, pct)` keeps the rows slower by more than pct percentage points beyond noise.
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


def compare_records(group: str, key: str, a: BenchRecord, b: BenchRecord) -> dict[str, Any]:
    row: dict[str, Any] = {"group": group, "key": key, "name": b.name, "dtype": b.dtype,
                           "a_median_s": a.median_s, "b_median_s": b.median_s}
    if a.status != "ok" or b.status != "ok" or not a.median_s or not b.median_s:
        row.update(verdict="not comparable", significant=False,
                   reason=f"status {a.status} vs {b.status}" if a.status != "ok" or b.status != "ok"
                   else "missing time")
        return row
    ratio = b.median_s / a.median_s
    change = (ratio - 1.0) * 100.0
    noise = 100.0 * (relative_iqr(a) + relative_iqr(b))
    significant = abs(change) > noise
    verdict = ("slower" if change > 0 else "faster") if significant else "same"
    row.update(ratio=ratio, change_pct=change, noise_pct=noise, significant=significant, verdict=verdict,
               beyond_noise_pct=max(0.0, abs(change) - noise) if significant else 0.0,
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
