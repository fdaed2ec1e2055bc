"""Eager-vs-compiled comparisons as rows, with the backend ladder bisection in order."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.profiles.sections.ops import CompiledRecord


@dataclass
class CompiledRow:
    record: CompiledRecord
    ladder: list[tuple[str, str]]  # (rung, verdict) in the order the bisection ran them

    @property
    def label(self) -> str:
        return f"{self.record.target} [{self.record.case}]" if self.record.case else self.record.target


def compiled_rows(records: list[CompiledRecord]) -> list[CompiledRow]:
    failing_first = sorted(records, key=lambda r: (not r.failing, r.target, r.dtype))
    return [CompiledRow(r, list(r.ladder.items())) for r in failing_first]
