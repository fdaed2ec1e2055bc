"""Differences from a baseline profile, from the same logic as `bringup profile diff`, marked on the report rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bringup.profiles.bench_diff import diff_bench
from bringup.profiles.diff import Change, diff_profiles
from bringup.profiles.schema import Profile

if TYPE_CHECKING:
    from bringup.report.sections.bench_tables import BenchTable
    from bringup.report.sections.capabilities import CapabilityRow
    from bringup.report.sections.ops_matrix import OpMatrix
    from bringup.report.sections.plan import PlanView

MOVED = ("slower", "faster")


@dataclass
class BaselineComparison:
    source: str
    changes: list[Change]
    bench: dict[tuple[str, str], dict[str, Any]]  # (group, key) -> diff_bench row
    changed_ops: set[tuple[str, str]]  # (op, dtype) with a case whose verdict differs
    plan_changes: list[tuple[str, str, str]] = field(default_factory=list)  # (setting, before, after)

    @property
    def changed(self) -> list[Change]:
        """Results recorded in both profiles that differ: what a reader must look at."""
        return [c for c in self.changes if c.before is not None and c.after is not None]

    @property
    def new(self) -> list[Change]:
        """Cases only this profile has (a grown catalog, a new bench group): not a changed result."""
        return [c for c in self.changes if c.before is None]

    @property
    def gone(self) -> list[Change]:
        """Cases only the baseline has."""
        return [c for c in self.changes if c.before is not None and c.after is None]

    def sections(self, changes: list[Change] | None = None) -> dict[str, list[Change]]:
        grouped: dict[str, list[Change]] = {}
        for change in self.changes if changes is None else changes:
            grouped.setdefault(change.section, []).append(change)
        return grouped

    def mark_capabilities(self, rows: list[CapabilityRow]) -> None:
        before = {c.key: c.before for c in self.changes if c.section == "capabilities"}
        for row in rows:
            if row.key in before:
                row.before = str(before[row.key]) if before[row.key] is not None else "absent"

    def mark_bench(self, tables: list[BenchTable]) -> None:
        for table in tables:
            for row in table.rows:
                found = self.bench.get((table.group, row.record.key))
                if found is None:
                    continue
                verdict = found["verdict"]
                if verdict in MOVED:
                    row.change_kind = verdict
                    row.change = (f"{verdict}: time x{found['ratio']:.3f} vs baseline "
                                  f"(noise ±{found['noise_pct']:.1f}%)")
                elif verdict == "added":
                    row.change_kind, row.change = "added", "not in the baseline"

    def mark_ops(self, matrix: OpMatrix) -> None:
        for op, cells in matrix.rows:
            for dtype, cell in cells.items():
                cell.changed = (op, dtype) in self.changed_ops

    def compare_plan(self, current: PlanView, baseline: PlanView) -> None:
        before = {row.setting: row.value for row in baseline.rows}
        for row in current.rows:
            if row.setting in before and before[row.setting] != row.value:
                row.before = before[row.setting]
                self.plan_changes.append((row.setting, before[row.setting], row.value))


def changed_op_cells(baseline: Profile, current: Profile) -> set[tuple[str, str]]:
    """(op, dtype) with a case both profiles ran whose verdict differs (a case new to the catalog is not a change)."""
    before = {r.key(): r.status for r in baseline.ops}
    after = {r.key(): r.status for r in current.ops}
    return {(key[0], key[1]) for key in before.keys() & after.keys() if before[key] != after[key]}


def compare_to_baseline(baseline: Profile, current: Profile, source: str) -> BaselineComparison:
    rows = {(row["group"], row["key"]): row for row in diff_bench(baseline.bench, current.bench)}
    return BaselineComparison(source, diff_profiles(baseline, current), rows, changed_op_cells(baseline, current))
