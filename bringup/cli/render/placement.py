"""Where verify-ops' ops ran, for the terminal and --json: the hot-path ops that went through the host (each a
warning of the verdict), the others that did (information), and a table of every op that fell back."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.table import Table

from bringup.cli.output import name_some, plain
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.verdict.host_fallback import OpPlacement, op_placements
from bringup.terminal_text import markup_safe

NAMED = 8


def placement_lines(records: list[OpCaseRecord]) -> list[str]:
    """`runs through the host, on the hot path (warn): rms_norm, topk` and the off-hot-path line (info)."""
    placements = [p for p in op_placements(records) if p.falls_back]
    hot = [p.op for p in placements if p.hot_path]
    other = [p.op for p in placements if not p.hot_path]
    lines = []
    if hot:
        lines.append(f"[yellow]runs through the host, on the hot path (warn)[/]: {markup_safe(name_some(hot, NAMED))}")
    if other:
        lines.append(f"[dim]runs through the host, off the hot path (info)[/]: {markup_safe(name_some(other, NAMED))}")
    return lines


def runs_on_cell(placement: OpPlacement | None) -> str:
    """The matrix's `runs on` cell: device, host n/m, or - where nothing was decided (the host itself)."""
    if placement is None:
        return "[dim]-[/]"
    if not placement.falls_back:
        return "[green]device[/]"
    return f"[yellow]host {len(placement.fell_back)}/{placement.decided}[/]"


def placement_table(records: list[OpCaseRecord]) -> Table | None:
    """One row per op that went through the host in some case: hot path or not, how often, the evidence."""
    placements = [p for p in op_placements(records) if p.falls_back]
    if not placements:
        return None
    table = Table(title="runs through the host (host fallback)", title_justify="left")
    for col in ("op", "hot path", "runs on", "evidence (first case)"):
        table.add_column(col, overflow="fold")
    for p in placements:
        table.add_row(plain(p.op), "[yellow]yes (warn)[/]" if p.hot_path else "[dim]no (info)[/]",
                      plain(p.runs_on()), plain(p.evidence()[:200]))
    return table


def placement_json(records: list[OpCaseRecord]) -> dict[str, Any]:
    """Cases per runs_on (undecided ones under "undecided") and every op that fell back, with its evidence."""
    counts = Counter(r.runs_on or "undecided" for r in records)
    fell_back = [{"op": p.op, "hot_path": p.hot_path, "cases": p.decided, "host_fallback_cases": len(p.fell_back),
                  "dtypes": p.dtypes, "evidence": p.evidence()}
                 for p in op_placements(records) if p.falls_back]
    return {"runs_on": dict(counts), "host_fallback_ops": fell_back}
