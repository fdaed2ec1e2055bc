"""Bench groups as tables: measured rows with their spread, skipped ones grouped by reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection
from bringup.report.text import MISSING, number, percent

MEMORY_GROUPS = ("bandwidth", "transfer")  # their figure is bytes moved: GB/s, whatever arithmetic they do


@dataclass
class BenchRow:
    record: BenchRecord
    change: str | None = None  # vs the baseline: "slower: time x1.3 (noise ±4%)", "added", ...
    change_kind: str | None = None  # slower | faster | added
    group: str = ""
    ceiling: str = ""  # the ceiling its percentage is of, named (e.g. "triad 34.2 GB/s, measured in this run")

    @property
    def rate(self) -> str:
        """The figure in the unit of what bounds it: GB/s for memory-bound work, TFLOP/s for compute."""
        r = self.record
        if r.gbps and (self.group in MEMORY_GROUPS or r.bound == "memory" or not r.tflops):
            return f"{number(r.gbps)} GB/s"
        if r.tflops:
            return f"{number(r.tflops)} TFLOP/s"
        tokens = r.params.get("tokens_per_s")
        return f"{number(float(tokens))} tok/s" if isinstance(tokens, int | float) else ""

    @property
    def of_ceiling(self) -> str:
        """Percent of its ceiling, never above 100: a figure past its ceiling names the ceiling instead."""
        r = self.record
        pct = r.pct_datasheet if r.pct_datasheet is not None else r.pct_measured
        if pct is None:
            return MISSING
        return f"above its ceiling ({self.ceiling})" if pct > 100.0 else percent(pct)


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


def ceiling_name(record: BenchRecord, section: BenchSection) -> str:
    """The ceiling a record's percentage is of: the datasheet's when it has one, else this run's best."""
    memory = record.bound == "memory"
    sheet, measured = section.datasheet, section.ceilings
    if record.pct_datasheet is not None and sheet is not None:
        peak = sheet.memory_bandwidth_gbps if memory else sheet.dense_tflops.get(record.dtype or "")
        return f"{'bandwidth' if memory else record.dtype} {number(peak)} {'GB/s' if memory else 'TFLOP/s'}, " \
               f"datasheet {sheet.name}"
    if measured is None:
        return "no ceiling recorded"
    if memory:
        return f"{measured.gbps_kernel or 'bandwidth'} {number(measured.gbps)} GB/s, measured in this run"
    dtype = record.dtype or ""
    best = max(measured.tflops.get(dtype, 0.0), measured.attention_tflops.get(dtype, 0.0))
    return f"best {dtype} {number(best)} TFLOP/s, measured in this run"


def bench_table(name: str, group: BenchGroup, section: BenchSection) -> BenchTable:
    shown = [r for r in group.records if r.status in ("ok", "error")]
    rest = [r for r in group.records if r.status not in ("ok", "error")]
    rows = [BenchRow(r, group=name, ceiling=ceiling_name(r, section)) for r in shown]
    return BenchTable(name, group.status, group.reason, [readable_note(n) for n in group.notes],
                      settings_line(group), rows, skipped_groups(rest))


def readable_note(note: str) -> str:
    """A note as a person reads it: profiles before 0.2 ended the e2e note with the plan as a Python dict repr,
    which the plan table shows properly, so that tail is dropped."""
    head, found, _ = note.partition("; plan: {")
    return head if found else note


def bench_tables(section: BenchSection | None) -> list[BenchTable]:
    if section is None:
        return []
    return [bench_table(name, group, section) for name, group in section.groups.items()]
