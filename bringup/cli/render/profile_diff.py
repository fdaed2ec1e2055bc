"""`bringup profile diff` for a person: per-section tables with readable values, bench summarised by its
largest moves (all of them with --details), and the runner plan each profile gives the built-in model."""

from __future__ import annotations

import math
from typing import Any

from rich.table import Table

from bringup.cli.output import console, format_bytes, plain
from bringup.profiles.diff import Change
from bringup.profiles.schema import Profile
from bringup.terminal_text import markup_safe

BENCH_ROWS = 12  # the largest bench moves shown without --details
SECTION_TITLES = {"device": "device", "environment": "environment", "capabilities": "capabilities (exit 1)",
                  "ops": "op verdicts", "compiled": "compiled checks", "eval": "model evals",
                  "models": "model plans recorded by tune"}


def format_value(value: Any, key: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if key.endswith("bytes"):
        return format_bytes(int(value))
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:.4g}"


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def render_diff(before: str, after: str, changes: list[Change], plans: list[tuple[str, str, str]],
                details: bool) -> None:
    console.print(f"[bold]{markup_safe(before)}[/] → [bold]{markup_safe(after)}[/]")
    if not changes and not plans:
        console.print("no differences")
        return
    for section, title in SECTION_TITLES.items():
        rows = [c for c in changes if c.section == section]
        if rows:
            _table(title, [(c.key, format_value(c.before, c.key), format_value(c.after, c.key)) for c in rows])
    if plans:
        _table("runner plan for the built-in model", plans)
    _bench([c for c in changes if c.section == "bench"], details)


def _table(title: str, rows: list[tuple[str, str, str]]) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("key", overflow="fold", ratio=2)
    table.add_column("before", overflow="fold", ratio=2)
    table.add_column("after", overflow="fold", ratio=2)
    for row in rows:
        table.add_row(*(plain(cell) for cell in row))
    console.print(table)


def _bench(rows: list[Change], details: bool) -> None:
    if not rows:
        return
    moved = [c for c in rows if c.note.startswith(("faster", "slower"))]
    counts = {verdict: sum(c.note.startswith(verdict) for c in rows) for verdict in ("faster", "slower")}
    only = len(rows) - len(moved)
    console.print(f"bench: {counts['faster']} faster, {counts['slower']} slower beyond both runs' noise"
                  + (f", {only} measured in one profile only" if only else ""))
    moved.sort(key=lambda c: -abs(math.log(c.after / c.before)) if c.before and c.after else 0.0)
    rated = {c.key for c in moved if c.key.endswith(("(GB/s)", "(TFLOP/s)"))}
    shown = moved if details else moved[:BENCH_ROWS]
    table = Table(title="bench: time per measurement, or rate where the runs sized it differently"
                  + ("" if details else f" (largest {len(shown)}; --details for all)"), title_justify="left")
    for column in ("measurement", "before", "after", "change"):
        table.add_column(column, overflow="fold")
    for c in shown:
        slower = c.before / c.after if c.key in rated else c.after / c.before  # > 1: after is slower
        change = f"{slower:.2f}x slower" if slower > 1 else f"{1 / slower:.2f}x faster"
        shown_value = (lambda v: f"{v:.3g}") if c.key in rated else format_seconds
        table.add_row(plain(c.key), shown_value(c.before), shown_value(c.after), f"{change} ({c.note.split('(')[-1]}"
                      if "(" in c.note else change)
    console.print(table)


def plan_rows(a: Profile, b: Profile) -> list[tuple[str, str, str]]:
    """The plan settings that differ between the two profiles, for the built-in model (no device needed)."""
    from bringup.report.sections.plan import draft_rows

    def settings(p: Profile) -> dict[str, str]:
        try:
            rows, _ = draft_rows(p)
        except Exception as exc:  # a profile whose evidence rules out every path: say so, don't fail the diff
            return {"plan": f"refused: {exc}"}
        return {row.setting: row.value for row in rows}

    sa, sb = settings(a), settings(b)
    return [(k, sa.get(k, "—"), sb.get(k, "—")) for k in sa | sb if sa.get(k) != sb.get(k)]
