"""Bench groups as tables: measured rows with their spread, skipped ones grouped by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection
from bringup.report.text import number


@dataclass
class BenchRow:
    record: BenchRecord
    change: str | None = None  # vs the baseline: "slower: time x1.3 (noise ±4%)", "added", ...
    change_kind: str | None = None  # slower | faster | added

    @property
    def rate(self) -> str:
        r = self.record
        if r.tflops:
            return f"{number(r.tflops)} TFLOP/s"
        if r.gbps:
            return f"{number(r.gbps)} GB/s"
        tokens = r.params.get("tokens_per_s")
        return f"{number(float(tokens))} tok/s" if isinstance(tokens, int | float) else ""


@dataclass
class SkippedGroup:
    status: str
    reason: str
    keys: list[str]


@dataclass
class BenchTable:
    group: str
    status: str
    reason: str | None
    notes: list[str]
    settings: str
    rows: list[BenchRow]
    skipped: list[SkippedGroup] = field(default_factory=list)


def settings_line(group: BenchGroup) -> str:
    s = group.settings
    if s is None:
        return ""
    return (f"warm-up {s.warmup}, {s.min_reps}–{s.max_reps} reps, stop at IQR/median ≤ {s.rel_iqr_threshold:g} "
            f"or {s.budget_s:g} s, cache flush {'on' if s.flush_cache else 'off'}; preset {group.preset}")


def skipped_groups(records: list[BenchRecord]) -> list[SkippedGroup]:
    reasons = Counter((r.status, r.reason or "no reason recorded") for r in records)
    return [SkippedGroup(status, reason, [r.key for r in records if (r.status, r.reason or "no reason recorded")
                                          == (status, reason)]) for (status, reason), _ in reasons.most_common()]


def bench_table(name: str, group: BenchGroup) -> BenchTable:
    shown = [r for r in group.records if r.status in ("ok", "error")]
    rest = [r for r in group.records if r.status not in ("ok", "error")]
    return BenchTable(name, group.status, group.reason, list(group.notes), settings_line(group),
                      [BenchRow(r) for r in shown], skipped_groups(rest))


def bench_tables(section: BenchSection | None) -> list[BenchTable]:
    if section is None:
        return []
    return [bench_table(name, group) for name, group in section.groups.items()]
