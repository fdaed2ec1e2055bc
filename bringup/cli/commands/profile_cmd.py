"""`bringup profile show | validate | diff`: read, check and compare capability profiles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bringup.cli.common import JsonOption
from bringup.cli.lazy_group import MARKUP_MODE
from bringup.cli.output import console, format_bytes, plain, print_json
from bringup.terminal_text import markup_safe as safe

if TYPE_CHECKING:
    from bringup.profiles.schema import Profile

app = typer.Typer(help="Read, check and compare capability profiles.", no_args_is_help=True,
                  rich_markup_mode=MARKUP_MODE)
ProfileArg = Annotated[Path, typer.Argument(help="Profile YAML file.")]


@app.command("show")
def show(path: ProfileArg, json_out: JsonOption = False) -> None:
    """Summarise a profile: device, environment, capabilities, each section's checks in one line
    (`verify-ops: 1042 pass, 0 warn, 0 fail, 36 skip`), stages, how to deploy vLLM and llama.cpp on it (`bringup
    export` shows each flag's evidence), and the verdict."""
    from bringup.cli.render.check_results import capabilities_table, print_section_lines
    from bringup.cli.render.verdict_line import verdict_markup
    from bringup.profiles.store import load_profile
    from bringup.profiles.verdict import verdict_of

    profile = load_profile(path)
    if json_out:
        print_json("profile", profile.to_document())
        return
    if profile.device:
        d = profile.device
        console.print(f"[bold]{safe(d.id)}[/] {safe(d.name)} ({safe(d.backend)}, {safe(d.vendor or '?')}, "
                      f"{safe(d.arch or '?')}), memory {format_bytes(d.memory_total_bytes)}")
    if profile.environment:
        e = profile.environment
        console.print(plain(f"bringup {e.bringup}, torch {e.torch}, python {e.python}, driver {e.driver or '—'}, "
                            f"{e.os}"))
    verdict = verdict_of(profile)
    probe = [c for c in verdict.checks if c.stage == "probe"]
    if probe:
        console.print(capabilities_table(probe))
    print_section_lines([c for c in verdict.checks if c.stage != "stages"])
    for stage, stamp in profile.stages.items():
        console.print(plain(f"stage {stage}: {stamp.status}, finished {stamp.finished} (bringup {stamp.bringup})"))
    for line in deploy_lines(profile):
        console.print(plain(line))
    console.print(verdict_markup(verdict), highlight=False)


def deploy_lines(profile: Profile) -> list[str]:
    """The "deploy with" part: each engine's command and settings (`bringup export` has their evidence)."""
    from bringup.report.sections.deploy import deploy_views
    from bringup.report.text import one_line

    lines = []
    for view in deploy_views(profile):
        if view.refused:
            lines.append(f"deploy with {view.engine}: no configuration: {view.refused}")
            continue
        left = [r.name for r in view.rows if r.value == "left out"]
        lines += [f"deploy with {view.engine} ({view.version}):", f"  {view.command}",
                  *(f"    {r.name}{f' {r.value}' if r.value else ''}: {one_line(r.reason, 110)}" for r in view.rows
                    if r.value != "left out")]
        if left:
            lines.append(f"    left out: {', '.join(left)} (`bringup export --engine {view.engine}` says why)")
    return lines


@app.command("validate")
def validate(path: ProfileArg, json_out: JsonOption = False) -> None:
    """Check a profile against the schema; exit 0 when valid, 2 with the first problem when not."""
    from bringup.profiles.store import load_profile

    profile = load_profile(path)
    summary = {"path": str(path), "valid": True, "profile_schema": profile.schema_version,
               "stages": {k: v.status for k, v in profile.stages.items()}}
    if json_out:
        print_json("profile-validate", summary)
    else:
        console.print(plain(f"{path}: valid ({profile.schema_version})"))


@app.command("diff")
def diff(before: ProfileArg, after: ProfileArg, json_out: JsonOption = False,
         details: Annotated[bool, typer.Option("--details", help="List every bench measurement that moved, not "
                                               "only the largest.")] = False,
         fail_on: Annotated[str, typer.Option("--fail-on", metavar="SECTIONS", help="Exit 1 on a difference in "
                                              "these sections (comma-separated): capabilities (any status that "
                                              "differs), ops and compiled (a verdict that was pass and is not), "
                                              "bench (slower beyond noise), device, environment; or none.")]
         = "capabilities") -> None:
    """Show what changed from BEFORE to AFTER ("what changed since it last worked"): device, environment,
    capability statuses, op and compiled verdicts, the runner plan each gives, and bench measurements that
    moved beyond both runs' noise.

    Exit code 1 when any capability status differs (or, with --fail-on, a difference in the sections named there,
    e.g. `--fail-on capabilities,ops` also fails on any op verdict that went from pass to anything else), so
    scripts can gate on it.
    """
    from bringup.cli.render.profile_diff import plan_rows, render_diff
    from bringup.profiles.diff import diff_profiles
    from bringup.profiles.diff_gate import failing_changes, parse_gates
    from bringup.profiles.store import load_profiles

    gates = parse_gates(fail_on)
    a, b = load_profiles([before, after])
    changes = diff_profiles(a, b)
    plans = plan_rows(a, b)
    failing = failing_changes(changes, gates)
    if json_out:
        print_json("profile-diff", {"changes": [c.to_dict() for c in changes],
                    "capabilities_differ": any(c.section == "capabilities" for c in changes),
                    "fail_on": gates, "failing": len(failing),
                    "plan": [{"setting": k, "before": x, "after": y} for k, x, y in plans]})
    else:
        render_diff(str(before), str(after), changes, plans, details)
        if failing:
            sections = sorted({c.section for c in failing})
            console.print(plain(f"FAIL: {len(failing)} difference(s) in {', '.join(sections)} "
                                f"(--fail-on {','.join(gates)})"))
    if failing:
        raise typer.Exit(1)
