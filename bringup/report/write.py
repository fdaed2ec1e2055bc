"""Load a profile (and a baseline), render the report, write it beside the profile, to a path, or to stdout."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

from bringup.errors import BringupError
from bringup.profiles.profile_file import NotAProfileFile, replace_text
from bringup.profiles.store import load_profile, printable
from bringup.report.html import render_html
from bringup.report.markdown import render_markdown
from bringup.report.model import build_report
from bringup.terminal_text import shown

ReportFormat = Literal["html", "md"]
SUFFIXES: dict[str, str] = {"html": ".html", "md": ".md"}
STDOUT = Path("-")


def default_report_path(profile_path: Path, fmt: ReportFormat = "html") -> Path:
    """`<profile stem>.html` (or `.md`) beside the profile."""
    return Path(profile_path).with_suffix(SUFFIXES[fmt])


def render_report(profile_path: Path, baseline_path: Path | None = None, fmt: ReportFormat = "html") -> str:
    """The report text; a BringupError (one line) when a profile cannot be read. A fleet folder (the --out of
    `bringup fleet`) gives the fleet page."""
    from bringup.probes.fleet.naming import is_fleet_folder

    if is_fleet_folder(Path(profile_path)):
        from bringup.report.fleet import render_fleet

        return render_fleet(Path(profile_path), fmt)
    profile = load_profile(Path(profile_path))
    baseline = load_profile(Path(baseline_path)) if baseline_path is not None else None
    report = build_report(profile, str(profile_path), baseline, str(baseline_path) if baseline_path else None)
    return render_html(report) if fmt == "html" else render_markdown(report)


def write_text(path: Path, text: str) -> None:
    """Temp file beside the real target, then rename: a reader never sees half a report; an old report keeps its
    mode."""
    try:
        replace_text(path, text)
    except (OSError, NotAProfileFile) as exc:
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else f"it {exc}"
        raise BringupError(printable(f"cannot write report {path}: {reason}; choose another -o path")) from None


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file, through links (an `a` that does not exist yet is no file)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def refuse_overwriting_inputs(target: Path, inputs: list[Path]) -> None:
    """The report never replaces the profile or baseline it was made from."""
    for source in inputs:
        if same_file(target, source):
            raise BringupError(printable(f"report output {target} is the input {source}; writing it would replace "
                                         "the profile with the report: choose another -o path"))


def output_path(profile_path: Path, out_path: Path | None, fmt: ReportFormat) -> Path:
    from bringup.probes.fleet.naming import is_fleet_folder

    if is_fleet_folder(Path(profile_path)):  # <folder>/fleet.html unless told otherwise
        from bringup.report.fleet import FLEET_REPORT

        profile_path = Path(profile_path) / FLEET_REPORT
    if out_path is None:
        return default_report_path(profile_path, fmt)
    if out_path.is_dir():
        return out_path / default_report_path(Path(profile_path).name, fmt)
    return out_path


def write_report(profile_path: Path, out_path: Path | None = None, baseline_path: Path | None = None,
                 fmt: ReportFormat = "html") -> Path:
    """Render and write the report; returns where it went (`-` for stdout). Default: beside the profile."""
    if out_path == STDOUT:
        sys.stdout.write(shown(render_report(profile_path, baseline_path, fmt), limit=None))
        sys.stdout.flush()
        return STDOUT
    target = output_path(Path(profile_path), out_path, fmt)
    refuse_overwriting_inputs(target, [Path(p) for p in (profile_path, baseline_path) if p is not None])
    write_text(target, render_report(profile_path, baseline_path, fmt))
    return target
