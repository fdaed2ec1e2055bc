"""`bringup report`: one self-contained HTML page (or a short Markdown summary) from a profile, optionally compared
with a baseline profile. Reads only; rendering lives in bringup.report."""

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from bringup.cli.output import print_json
from bringup.errors import BringupError


class ReportFormat(str, Enum):
    html = "html"
    md = "md"


ReportProfileOption = Annotated[
    Optional[Path],
    typer.Option("--profile", "-p", help="Profile YAML to report on (default: the only profile in ./profiles), or a "
                 "fleet folder (the --out of `bringup fleet`) for the fleet page.",
                 show_default=False),
]
BaselineOption = Annotated[
    Optional[Path],
    typer.Option("--baseline", "-b", help="An earlier profile to compare with; differences are highlighted.",
                 show_default=False),
]
OutputOption = Annotated[
    Optional[Path],
    typer.Option("--output", "-o", help="Where to write (a file, a folder, or - for stdout; default: beside the "
                 "profile, <profile stem>.html or .md).", show_default=False),
]
FormatOption = Annotated[
    ReportFormat, typer.Option("--format", "-f", help="html: the full page; md: a summary to paste into an issue."),
]


def only_profile_here() -> Path:
    found = sorted(Path("profiles").glob("*.yaml")) if Path("profiles").is_dir() else []
    if len(found) == 1:
        return found[0]
    listed = f" ({', '.join(str(p) for p in found[:5])})" if found else ""
    raise BringupError(f"no --profile given and ./profiles holds {len(found)} profiles{listed}; "
                       "pass --profile PATH")


def command(
    profile: ReportProfileOption = None,
    baseline: BaselineOption = None,
    output: OutputOption = None,
    fmt: FormatOption = ReportFormat.html,
    json_out: Annotated[bool, typer.Option("--json", help="Print where the report went as JSON "
                                           "({\"report\": path, \"format\": ...}) instead of a line.")] = False,
) -> None:
    """Write a report of a profile: device, environment, capabilities, the op × dtype matrix with every failing
    case, eager vs compiled, a roofline chart, bench tables, the runner plan, fallbacks, selftest, collectives —
    and, with --baseline, what changed.

    Example: `bringup report -p profiles/cpu.yaml`, `bringup report -p new.yaml -b old.yaml --format md -o -`.
    """
    from bringup.report.write import STDOUT, write_report

    path = profile if profile is not None else only_profile_here()
    written = write_report(path, output, baseline, fmt.value)
    if json_out and written != STDOUT:
        print_json("report", {"report": str(written), "format": fmt.value})
    elif written != STDOUT:
        typer.echo(f"report: {written}")
