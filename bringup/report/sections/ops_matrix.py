"""The op × dtype matrix of verify-ops verdicts, the failing cases each cell drills down to, and the ops that ran
through the host."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.verdict.host_fallback import OpPlacement, op_placements

# worst first: a cell takes the colour of its worst case
STATUS_ORDER = ("crashed", "timeout", "error", "fail", "unsupported", "pass")


@dataclass
class MatrixCell:
    counts: dict[str, int]
    failing: list[int] = field(default_factory=list)  # indexes into OpMatrix.failing
    changed: bool = False  # a case here changed verdict since the baseline

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def status(self) -> str:
        return next((s for s in STATUS_ORDER if self.counts.get(s)), "pass")

    def summary(self) -> str:
        passed = self.counts.get("pass", 0)
        rest = ", ".join(f"{n} {s}" for s in STATUS_ORDER if s != "pass" and (n := self.counts.get(s)))
        return f"{passed}/{self.total}" + (f" ({rest})" if rest else "")


@dataclass
class OpMatrix:
    dtypes: list[str]
    rows: list[tuple[str, dict[str, MatrixCell]]]
    failing: list[OpCaseRecord]
    unsupported: list[OpCaseRecord]
    totals: dict[str, int]
    placed: int = 0  # cases whose placement (device or host fallback) was decided: none on the host itself
    host_fallbacks: list[OpPlacement] = field(default_factory=list)  # ops with a case that ran through the host

    @property
    def measured(self) -> bool:
        return bool(self.rows)


def op_matrix(records: list[OpCaseRecord]) -> OpMatrix:
    dtypes = list(dict.fromkeys(r.dtype for r in records))
    cells: dict[str, dict[str, MatrixCell]] = {}
    failing: list[OpCaseRecord] = []
    for record in records:
        cell = cells.setdefault(record.op, {}).setdefault(record.dtype, MatrixCell(counts={}))
        cell.counts[record.status] = cell.counts.get(record.status, 0) + 1
        if record.failing:
            cell.failing.append(len(failing))
            failing.append(record)
    return OpMatrix(
        dtypes=dtypes,
        rows=sorted(cells.items()),
        failing=failing,
        unsupported=[r for r in records if r.status == "unsupported"],
        totals=dict(Counter(r.status for r in records)),
        placed=sum(r.runs_on is not None for r in records),
        host_fallbacks=[p for p in op_placements(records) if p.falls_back],
    )
