"""Where each op ran, over its cases (OpCaseRecord.runs_on), and the verdict's checks for the runner's hot path.

A hot-path op (bringup/profiles/hot_path.py) that went through the host in any case is one warning naming the op
and its evidence: the answers are right and the device idles while the host computes. A hot-path op that ran on
the device in every decided case passes. An op off the hot path that fell back is listed (report, verify-ops
output) for information, not checked. Records without runs_on (the host itself, older profiles) are not counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.profiles.hot_path import on_hot_path
from bringup.profiles.sections.ops import HOST_FALLBACK, OpCaseRecord
from bringup.profiles.verdict.checks import Check

STAGE = "host-fallback"


@dataclass
class OpPlacement:
    """One op over the cases whose placement was decided."""

    op: str
    decided: int = 0
    fell_back: list[OpCaseRecord] = field(default_factory=list)

    @property
    def hot_path(self) -> bool:
        return on_hot_path(self.op)

    @property
    def falls_back(self) -> bool:
        return bool(self.fell_back)

    @property
    def dtypes(self) -> list[str]:
        """The dtypes in which some case went through the host."""
        return list(dict.fromkeys(r.dtype for r in self.fell_back))

    def runs_on(self) -> str:
        """`device`, or `host fallback (3 of 6 cases)`."""
        if not self.fell_back:
            return "device"
        return f"host fallback ({len(self.fell_back)} of {self.decided} cases)"

    def evidence(self) -> str:
        """The first falling-back case and what it dispatched."""
        if not self.fell_back:
            return f"no host copy in {self.decided} cases"
        first = self.fell_back[0]
        return f"{first.dtype} {first.case}: {first.runs_on_evidence or 'no evidence recorded'}"


def op_placements(records: list[OpCaseRecord]) -> list[OpPlacement]:
    """Every op with a decided case, in the records' order."""
    placements: dict[str, OpPlacement] = {}
    for record in records:
        if record.runs_on is None:
            continue
        placement = placements.setdefault(record.op, OpPlacement(record.op))
        placement.decided += 1
        if record.runs_on == HOST_FALLBACK:
            placement.fell_back.append(record)
    return list(placements.values())


def host_fallback_checks(records: list[OpCaseRecord]) -> list[Check]:
    """One check per hot-path op with a decided case: warn when any case went through the host, else pass."""
    checks = []
    for placement in op_placements(records):
        if not placement.hot_path:
            continue
        if placement.falls_back:
            reason = (f"runs through the host in {len(placement.fell_back)} of {placement.decided} cases "
                      f"({', '.join(placement.dtypes)}): {placement.evidence()}")
            checks.append(Check(STAGE, placement.op, "warn", reason))
        else:
            checks.append(Check(STAGE, placement.op, "pass", f"runs on the device in all {placement.decided} cases"))
    return checks


def off_hot_path_fallbacks(records: list[OpCaseRecord]) -> list[OpPlacement]:
    """Ops off the runner's hot path that went through the host: information, not a warning."""
    return [p for p in op_placements(records) if p.falls_back and not p.hot_path]
