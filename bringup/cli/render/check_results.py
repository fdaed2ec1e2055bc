"""The verdict's four words on a stage's terminal output: pass / warn / fail / skip cells, the not-passing checks
by name, and the stage's closing line (`probe: 12 pass, 0 warn, 0 fail, 10 skip`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bringup.cli.output import console, name_some, plain
from bringup.terminal_text import markup_safe

if TYPE_CHECKING:
    from rich.table import Table

    from bringup.profiles.verdict import Check

RESULT_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "skip": "dim"}
NOT_PASSING = {"fail": "fail", "warn": "warn", "skip": "skip (not applicable)"}


def result_cell(result: str) -> str:
    """A table's status cell: the result in its colour."""
    return f"[{RESULT_STYLE[result]}]{result}[/]"


def print_not_passing(checks: list[Check], shown: int = 6) -> None:
    """One line per result that is not a pass, naming a few of its checks (a case's op[dtype], a check id)."""
    for result, label in NOT_PASSING.items():
        names = list(dict.fromkeys(c.name.split(" ", 1)[0] for c in checks if c.result == result))
        if names:
            console.print(f"[{RESULT_STYLE[result]}]{label}[/]: {markup_safe(name_some(names, shown))}",
                          highlight=False)


def print_section_line(stage: str, checks: list[Check]) -> None:
    """The stage's last line, as the verdict counts its section; red with a failure, yellow with a warning."""
    from bringup.profiles.verdict.section_line import section_line

    results = {c.result for c in checks}
    style = "red" if "fail" in results else "yellow" if "warn" in results else "green"
    console.print(f"[{style}]{markup_safe(section_line(stage, checks))}[/]", highlight=False)


def capabilities_table(checks: list[Check], seconds: dict[str, float] | None = None) -> Table:
    """The probe's checks with their result and reason (and seconds, from a run); `probe --details`, `profile show`."""
    from rich.table import Table

    table = Table(title="Capabilities (executed checks)", title_justify="left")
    for col in ("check", "result", "evidence / reason", *(("s",) if seconds is not None else ())):
        table.add_column(col, overflow="fold")
    for check in checks:
        timing = (f"{seconds.get(check.name, 0.0):.2f}",) if seconds is not None else ()
        table.add_row(plain(check.name), result_cell(check.result), plain(check.reason), *timing)
    return table


def print_section_lines(checks: list[Check]) -> None:
    """One line per section the checks span, in order: `probe: ...`, `verify-ops: ...`, `compiled: ...`."""
    for stage in dict.fromkeys(c.stage for c in checks):
        print_section_line(stage, [c for c in checks if c.stage == stage])
