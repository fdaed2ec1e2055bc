"""`bringup bench`: baseline microbenchmarks with a trustworthy harness, % of peak, regressions."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bringup.cli.checks import non_negative_number, positive_seconds
from bringup.cli.common import (
    DetailsOption,
    DeviceOption,
    ForceOption,
    JsonOption,
    ModelOption,
    ProfileOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.output import console, name_some, plain, print_json, progress
from bringup.cli.render.check_results import print_section_line, result_cell
from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.terminal_text import markup_safe as safe


class OutputFormat(str, Enum):
    md = "md"
    csv = "csv"
    json = "json"
    jsonl = "jsonl"


def render_rows(fmt: str, section: BenchSection, groups: list[str]) -> str:
    from bringup.cli.output import schema_id
    from bringup.probes.bench.export import to_csv, to_jsonl, to_markdown

    if fmt == "md":
        return to_markdown(section, groups)
    if fmt == "csv":
        return to_csv(section, groups)
    return to_jsonl(section, schema_id("bench-row"), groups)


if TYPE_CHECKING:  # these import torch: loaded when the command runs, not for --help
    from rich.table import Table
    from rich.text import Text

    from bringup.cli.common import StageContext
    from bringup.probes.bench.stage import BenchRun
    from bringup.profiles.schema import Profile
    from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection
    from bringup.profiles.verdict import Check

log = get_logger("bench")
# the keys of bringup.probes.bench.stage.GROUPS, spelled out so that --help need not import torch (a test checks)
GROUP_NAMES = ("matmul", "bandwidth", "transfer", "dispatch", "attention", "ops", "compiled", "e2e", "serve")
GROUP_LIST = ", ".join(GROUP_NAMES)


def load_baseline(path: Path | None) -> BenchSection | None:
    from bringup.profiles.store import load_profile

    if path is None:
        return None
    found = load_profile(path)
    if found.bench is None or not found.bench.groups:
        raise BringupError(f"baseline {path} has no bench results; run `bringup bench --profile {path}` "
                           "on the baseline setup first")
    return found.bench


def existing_profile(path: Path, info: Any, force: bool) -> Profile | None:
    """The profile to read capabilities/ops from; refuses another device's profile before any work."""
    from bringup.profiles.schema import DeviceSection
    from bringup.profiles.store import check_identity, load_profile_or_none

    try:
        found = load_profile_or_none(path)
    except BringupError:
        if force:
            return None
        raise
    if found is not None and not force:
        check_identity(path, found, DeviceSection.model_validate(info.to_dict()))
    return found


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def fmt_rate(record: BenchRecord) -> str:
    """TFLOP/s for compute kernels (GFLOP/s under 1 TFLOP/s), GB/s for pure data movement."""
    if record.tflops is not None and record.name not in ("scale", "add", "triad", "dot"):
        return f"{record.tflops * 1000:.3g} GFLOP/s" if record.tflops < 1 else f"{record.tflops:.3g} TFLOP/s"
    return f"{record.gbps:.3g} GB/s" if record.gbps is not None else ""


def fmt_pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}%"


def fmt_peak(record: BenchRecord) -> str:
    """% of the measured ceiling, then % of the datasheet peak when the device is known."""
    parts = [fmt_pct(record.pct_measured) or "-"]
    if record.pct_datasheet is not None:
        parts.append(fmt_pct(record.pct_datasheet))
    return " / ".join(parts) if record.pct_measured is not None or record.pct_datasheet is not None else ""


def record_note(record: BenchRecord) -> Text:
    """The note cell: styled words of our own (a record's text is never read as markup)."""
    from rich.text import Text

    notes: list[tuple[str, str]] = []
    if record.noisy:
        notes.append(("noisy", "red"))
    if record.verified is False:
        notes.append(("unverified", "yellow"))
    if record.runs_on == "host_fallback":
        notes.append(("host fallback", ""))
    if record.speedup is not None:
        notes.append((f"{record.speedup:.2f}x vs plain", ""))
    if record.bound:
        notes.append(("mem" if record.bound == "memory" else "compute", ""))
    return Text(" ").join(Text(word, style=style) for word, style in notes)


def group_table(name: str, group: BenchGroup, check: Check) -> Table:
    from rich.table import Table

    title = f"{name} — {check.result}" + (f" ({group.reason})" if group.reason else "")
    table = Table(title=plain(title), title_justify="left", show_lines=False)
    peak_title = "% peak (run / sheet)" if any(r.pct_datasheet is not None for r in group.records) else "% peak"
    for column in ("measurement", "median ±IQR/med", "reps", "rate", peak_title, "note"):
        table.add_column(column, justify="left" if column in ("measurement", "note") else "right",
                         overflow="fold")
    for r in group.records:
        if r.status != "ok":
            continue
        rel = f" ±{100 * r.iqr_s / r.median_s:.0f}%" if r.median_s and r.iqr_s is not None else ""
        table.add_row(plain(r.key), fmt_time(r.median_s) + rel, str(r.reps), fmt_rate(r), fmt_peak(r),
                      record_note(r))
    if group.notes:
        table.caption = plain("; ".join(group.notes))
        table.caption_justify = "left"
    return table


def not_measured_lines(group: BenchGroup) -> list[str]:
    """Records that were not measured, one line per (result, reason) with their keys: warn for an error, skip for
    a measurement skipped or not applicable."""
    from bringup.profiles.verdict.run_checks import BENCH_RECORD_RESULT

    by_reason: dict[tuple[str, str], list[str]] = {}
    for r in group.records:
        if r.status != "ok":
            by_reason.setdefault((BENCH_RECORD_RESULT[r.status], r.reason or ""), []).append(r.key)
    return [f"  {result_cell(result)} {safe(', '.join(keys))}: {safe(reason)}"
            for (result, reason), keys in by_reason.items()]


def print_group(name: str, group: BenchGroup, check: Check) -> None:
    if any(r.status == "ok" for r in group.records):
        console.print(group_table(name, group, check))
    else:
        console.print(f"[bold]{name}[/] — {result_cell(check.result)}"
                      + (f": {safe(group.reason)}" if group.reason else ""))
    for line in not_measured_lines(group):
        console.print(line, highlight=False)


def group_line(name: str, group: BenchGroup, check: Check) -> str:
    """One line per group: its result, the best rate (or the fastest time) measured, what was not measured."""
    from bringup.profiles.verdict.run_checks import BENCH_RECORD_RESULT

    ok = [r for r in group.records if r.status == "ok"]
    text = f"[bold]{name}[/] {result_cell(check.result)}"
    rated = [r for r in ok if fmt_rate(r)]
    if rated:
        best = max(rated, key=lambda r: r.tflops if r.tflops is not None and r.name not in ("scale", "add", "triad",
                                                                                             "dot") else r.gbps or 0)
        text += f": {len(ok)} measured, best {fmt_rate(best)} ({safe(best.key)})"
    elif ok:
        fastest = min(ok, key=lambda r: r.median_s if r.median_s is not None else float("inf"))
        text += f": {len(ok)} measured, fastest {fmt_time(fastest.median_s)} ({safe(fastest.key)})"
    elif group.reason:
        text += f": {safe(group.reason)}"
    not_measured = [BENCH_RECORD_RESULT[r.status] for r in group.records if r.status != "ok"]
    if not_measured:
        text += "; not measured: " + ", ".join(f"{not_measured.count(result)} {result}"
                                               for result in ("warn", "skip") if result in not_measured)
    return text


def print_summary(chosen: list[str], groups: dict[str, BenchGroup], left_out: dict[str, str],
                  checks: dict[str, Check]) -> None:
    for name in chosen:
        console.print(group_line(name, groups[name], checks[name]), highlight=False)
    if left_out:
        console.print(f"[dim]left out: {name_some(sorted(left_out), 4)} (--details says why)[/]", highlight=False)


def baseline_table(rows: list[dict[str, Any]]) -> Table:
    from rich.table import Table

    table = Table(title="against baseline (ratio = time now / time in baseline)", title_justify="left")
    for column in ("group", "measurement", "baseline", "now", "ratio", "change", "noise", "verdict"):
        table.add_column(column, justify="left" if column in ("group", "measurement", "verdict") else "right",
                         no_wrap=column != "measurement", overflow="fold")
    colours = {"slower": "red", "faster": "green"}
    for row in rows:
        verdict = row["verdict"]
        table.add_row(
            plain(row["group"]), plain(row["key"]), fmt_time(row.get("a_median_s")), fmt_time(row.get("b_median_s")),
            f"{row['ratio']:.3f}" if "ratio" in row else "",
            f"{row['change_pct']:+.1f}%" if "change_pct" in row else "",
            f"±{row['noise_pct']:.1f}%" if "noise_pct" in row else "",
            f"[{colours[verdict]}]{verdict}[/]" if verdict in colours else verdict,
        )
    return table


def command(
    quick: Annotated[bool, typer.Option("--quick", help="Small sizes and short budgets (about a minute on a "
                                        "2-core CPU); the default is the full run.")] = False,
    only: Annotated[Optional[list[str]], typer.Option("--only", help=f"Run only these groups (repeat or "
                                                       f"comma-separate): {GROUP_LIST}.")] = None,
    skip: Annotated[Optional[list[str]], typer.Option("--skip", help="Leave these groups out.")] = None,
    output_format: Annotated[Optional[OutputFormat], typer.Option(
        "--output-format", "-o", help="Print the measurements on stdout in this format instead of the summary, "
        "as llama-bench -o does: md (one Markdown table), csv, json (the --json document), jsonl (one JSON object "
        "per measurement).")] = None,
    csv_path: Annotated[Optional[Path], typer.Option("--csv", help="Also write every measurement of this run "
                                                     "as CSV to this file ('-' for stdout).")] = None,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Compare with the bench results in "
                                                     "another profile (another driver, another machine).")] = None,
    fail_on_regression: Annotated[Optional[float], typer.Option(
        "--fail-on-regression", metavar="PCT", help="With --baseline: exit 1 when any measurement is slower "
        "by more than PCT percent beyond the two runs' noise.", callback=non_negative_number)] = None,
    flush_cache: Annotated[bool, typer.Option("--flush-cache", help="Flush the last-level cache before every "
                                              "repetition (cold-cache numbers).")] = False,
    threshold: Annotated[Optional[float], typer.Option("--threshold", help="Stop repeating once IQR/median "
                                                       "is at or under this (default: the preset's).")] = None,
    budget: Annotated[Optional[float], typer.Option("--budget", help="Seconds per measurement before giving "
                                                    "up on stability (default: the preset's).",
                                                    callback=positive_seconds)] = None,
    include_unverified: Annotated[bool, typer.Option("--include-unverified", help="Also time op cases that "
                                                     "did not pass verify-ops, marked unverified.")] = False,
    e2e_dtype: Annotated[str, typer.Option("--e2e-dtype", help="dtype of the runner in the e2e group: auto (the "
                                          "plan's choice) or float32, bfloat16, float16.")] = "auto",
    model: ModelOption = None,
    device: DeviceOption = None,
    profile: ProfileOption = None,
    json: JsonOption = False,
    verbose: VerboseOption = False,
    force: ForceOption = False,
    details: DetailsOption = False,
) -> None:
    """Measure the device's baselines: matmul TFLOP/s per supported dtype, memory bandwidth, host
    transfers, dispatch latency, attention per SDPA backend, per-op latency of verified ops, and
    eager vs compiled blocks — each as % of datasheet peak (known devices) and of this run's
    measured ceilings. Results go to the profile's `bench` section with the harness settings.

    The serve group is the LLM speed card: batch-1 decode and prefill tokens/s, time to first token and
    inter-token latency p50/p90/p99 over a short serving run of the built-in model (or --model), with spread and
    samples kept in the profile.

    Example: bringup bench --quick --only matmul,bandwidth --baseline profiles/last-week.yaml
    --fail-on-regression 10; bringup bench --only serve --model ./SmolLM2-135M
    """
    from bringup.probes.bench.stage import BenchOptions, run_bench_stage, select_groups
    from bringup.profiles.bench_diff import diff_bench, regressions
    from bringup.profiles.sections.bench import BenchSection

    fmt = stdout_format(output_format, json, csv_path, fail_on_regression is not None and baseline is None)
    if threshold is not None and not 0 < threshold < 1:
        raise BringupError(f"--threshold {threshold} must be between 0 and 1 (a fraction, e.g. 0.05)")
    options = BenchOptions(quick=quick, only=tuple(only or ()), skip=tuple(skip or ()), flush_cache=flush_cache,
                           threshold=threshold, budget_s=budget, include_unverified=include_unverified,
                           e2e_dtype=None if e2e_dtype == "auto" else e2e_dtype, model_dir=model)
    select_groups(options)  # bad --only/--skip fail before any device work
    base_section = load_baseline(baseline)
    ctx = stage_context(device, profile, fmt is not None, verbose, force=force)
    found = existing_profile(ctx.profile_path, ctx.info, force)
    with progress(fmt is not None) as bar:
        task = bar.add_task("bench", total=len(select_groups(options)[0]))
        run = run_bench_stage(ctx.device, ctx.info, ctx.profile_path, found, options, force=force,
                              on_step=lambda text: bar.update(task, description=text),
                              on_group_done=lambda _name, _group: bar.advance(task))
    compared = diff_bench(BenchSection(groups={n: g for n, g in base_section.groups.items() if n in run.chosen}),
                          run.current) if base_section else []
    failed = regressions(compared, fail_on_regression) if fail_on_regression is not None else []
    if csv_path is not None:
        write_csv(csv_path, run.section, run.chosen)
    if fmt == "json":
        print_json("bench", json_document(ctx, options.preset.name, run, baseline, compared, failed))
    elif fmt is not None:
        print(render_rows(fmt, run.section, run.chosen), end="")
    elif not (csv_path is not None and str(csv_path) == "-"):
        print_run(ctx, options.preset.name, run, compared, details)
    if failed:
        log.error("%d measurement(s) slower than the baseline by more than %g%% beyond noise: %s", len(failed),
                  fail_on_regression, "; ".join(f"{r['group']}/{r['key']} {r['change_pct']:+.1f}%" for r in failed))
        raise typer.Exit(1)


def stdout_format(output_format: OutputFormat | None, json: bool, csv_path: Path | None,
                  regression_without_baseline: bool) -> str | None:
    """What stdout gets instead of the summary (md, csv, json, jsonl, or None); BringupError for flags that
    contradict each other."""
    if regression_without_baseline:
        raise BringupError("--fail-on-regression needs --baseline OTHER.yaml to compare against")
    if output_format is not None and json and output_format != OutputFormat.json:
        raise BringupError(f"--json and -o {output_format.value} both choose stdout's format; give one of them")
    fmt = output_format.value if output_format is not None else ("json" if json else None)
    if csv_path is not None and str(csv_path) == "-" and fmt is not None:
        raise BringupError(f"--csv - and {'--json' if json else '-o ' + fmt} both write to stdout; give --csv a "
                           "file path")
    return fmt


def write_csv(csv_path: Path, section: BenchSection, chosen: list[str]) -> None:
    """--csv: every measurement of this run, to the file or ('-') to stdout."""
    from bringup.probes.bench.export import to_csv

    text = to_csv(section, chosen)
    if str(csv_path) == "-":
        print(text, end="")
    else:
        csv_path.write_text(text, encoding="utf-8")
        log.info("wrote %s", csv_path)


def json_document(ctx: StageContext, preset: str, run: BenchRun, baseline: Path | None,
                  compared: list[dict[str, Any]], failed: list[dict[str, Any]]) -> dict[str, Any]:
    from bringup.probes.bench.export import rows as export_rows

    section, chosen, current = run.section, run.chosen, run.current
    return {
        "device": ctx.info.to_dict(), "profile": str(ctx.profile_path), "preset": preset,
        "settings": run.settings.model_dump(), "groups": {n: current.groups[n].model_dump() for n in chosen},
        "left_out": run.left_out, "ceilings": section.ceilings.model_dump() if section.ceilings else None,
        "datasheet": section.datasheet.model_dump() if section.datasheet else None,
        "datasheet_reason": section.datasheet_reason, "measurements": len(export_rows(current)),
        "baseline": {"path": str(baseline), "rows": compared} if baseline else None,
        "regressions": failed,
    }


def print_run(ctx: StageContext, preset: str, run: BenchRun, compared: list[dict[str, Any]], details: bool) -> None:
    """The terminal's account: the groups (a line each, or --details' tables), the ceilings, the datasheet, the
    baseline comparison, and the section's checks line."""
    from bringup.profiles.verdict.run_checks import bench_checks

    section, chosen, current = run.section, run.chosen, run.current
    checks = {c.name: c for c in bench_checks(current) if c.name in chosen}
    console.print(plain(f"measured on {ctx.info.id} ({ctx.info.name}), preset {preset}"), highlight=False)
    if details:
        for name in chosen:
            print_group(name, current.groups[name], checks[name])
        for name, why in run.left_out.items():
            console.print(f"[dim]{name}: left out — {safe(why)}[/]")
    else:
        print_summary(chosen, current.groups, run.left_out, checks)
    if section.ceilings:
        tf = ", ".join(f"{d} {v:.3g} TFLOP/s" for d, v in section.ceilings.tflops.items()) or "none"
        gbps = section.ceilings.gbps
        bw = f"{gbps:.3g} GB/s ({section.ceilings.gbps_kernel})" if gbps else "none"
        console.print(f"measured ceilings: matmul {tf}; bandwidth {bw}")
    console.print(plain(f"datasheet: {section.datasheet.name} — {section.datasheet.source}" if section.datasheet
                        else f"datasheet: {section.datasheet_reason}"))
    if compared:
        console.print(baseline_table(compared))
    console.print(plain(f"profile: {ctx.profile_path}" + ("" if details else " (--details: every measurement)")),
                  highlight=False)
    print_section_line("bench", [checks[name] for name in chosen])
