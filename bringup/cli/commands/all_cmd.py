"""`bringup all`: devices → probe → verify-ops → bench --quick → selftest into one profile, then a summary.

The terminal gets one screen: a transient progress line while a stage works, then one line per stage, a
compact plan, and where the profile and the log are. Each stage's full output, the INFO logs and
third-party warnings go to the log file beside the profile; WARNINGs (fallbacks) still reach the terminal.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from bringup.cli import output
from bringup.cli.checks import name_list
from bringup.cli.common import (
    DeviceOption,
    ForceOption,
    JsonOption,
    ModelOption,
    ProfileOption,
    StrictOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.engine_flags import engine_options
from bringup.cli.output import CompactWarnings, console, err_console, print_json
from bringup.cli.render.all_summary import plan_line, stage_figure
from bringup.cli.run_levels import DEFAULT_LEVEL, DEFAULT_SOAK_MINUTES, LEVEL_HELP, STAGE_NAMES, Stage, stages_for
from bringup.errors import BringupError
from bringup.log import capture_to_file, get_logger
from bringup.terminal_text import markup_safe

if TYPE_CHECKING:
    from bringup.profiles.schema import Profile
    from bringup.profiles.verdict import Verdict

log = get_logger("all")
LOG_WIDTH = 160


@dataclass
class StageRun:
    name: str
    action: str  # ran | skipped
    exit_code: int
    seconds: float
    status: str  # the profile stamp after the run


def run_stage(group: Any, stage: Stage, common: list[str], model: Path | None) -> int:
    args = [*stage.args, *common]
    if stage.takes_model and model is not None:
        args += ["--model", str(model)]
    log.info("stage %s: bringup %s", stage.name, " ".join(args))
    try:
        result = group.main(args, standalone_mode=False, prog_name="bringup")
    except SystemExit as exc:  # a stage that ends with sys.exit(code)
        return exc.code if isinstance(exc.code, int) else 1
    except BringupError as exc:  # a stage that refuses (no plan the profile allows, say): said, and the others run
        log.error("stage %s refused: %s", stage.name, exc)
        return 2
    except ModuleNotFoundError as exc:  # a stage needing an extra that is not installed: said, and the others run
        from bringup.cli.extras import missing_extra_message

        message = missing_extra_message(exc.name, stage.name)
        if message is None:
            raise
        log.error(message)
        return 2
    except Exception as exc:  # typer/click Exit (their class differs between typer versions)
        if type(exc).__name__ != "Exit":
            raise
        return int(getattr(exc, "exit_code", 1))
    return int(result or 0)


def stamp_status(profile: Profile | None, name: str) -> str:
    stamp = profile.stages.get(name) if profile else None
    return stamp.status if stamp else "missing"


def done_at_level(profile: Profile | None, name: str, level: int) -> bool:
    """Complete in the profile at `level` or deeper (a stage run on its own counts as the default level)."""
    stamp = profile.stages.get(name) if profile else None
    return stamp is not None and stamp.status == "complete" and (stamp.level or DEFAULT_LEVEL) >= level


def summary_facts(profile: Profile | None) -> dict[str, Any]:
    if profile is None:
        return {}
    facts: dict[str, Any] = {}
    if profile.capabilities:
        statuses = [c.status for group in profile.capabilities.groups().values() for c in group.values()]
        facts["capabilities"] = {s: statuses.count(s) for s in ("supported", "unsupported", "unknown")}
    if profile.ops:
        by_status: dict[str, int] = {}
        for record in profile.ops:
            by_status[record.status] = by_status.get(record.status, 0) + 1
        facts["ops"] = by_status
        facts["ops_not_passing"] = sorted({f"{r.op}[{r.dtype}]" for r in profile.ops
                                           if r.status in ("fail", "error", "crashed", "timeout")})
    if profile.compiled:
        facts["compiled"] = {s: sum(r.status == s for r in profile.compiled)
                             for s in sorted({r.status for r in profile.compiled})}
    if profile.bench and profile.bench.ceilings:
        ceilings = profile.bench.ceilings
        facts["bench"] = {"matmul_tflops": {k: round(v, 4) for k, v in ceilings.tflops.items()},
                          "bandwidth_gbps": round(ceilings.gbps, 2) if ceilings.gbps else None,
                          "bandwidth_kernel": ceilings.gbps_kernel}
    if profile.selftest:
        facts["selftest"] = {"status": profile.selftest.status, "max_abs_err": profile.selftest.max_abs_err,
                             "top1_agreement": profile.selftest.top1_agreement}
    return facts


def runner_plan(profile_path: Path, device: str, model: Path | None) -> list[tuple[str, str, str]]:
    """The plan the runner would use; none (said once) when the runner's extra is not installed."""
    try:
        from bringup.runner.engine.engine import LLMEngine
    except ModuleNotFoundError as exc:
        from bringup.cli.extras import missing_extra_message

        message = missing_extra_message(exc.name, "serve")
        if message is None:
            raise
        log.warning("no execution plan: %s", message)
        return []

    try:
        engine = LLMEngine.create(engine_options({"model_dir": model, "profile_path": profile_path, "device": device,
                                                  "max_num_seqs": 8, "max_model_len": 512}))
    except BringupError as exc:  # the profile allows no plan (every attention path failed, say): the verdict says why
        log.error("no execution plan: %s", exc)
        return [("plan", "none", f"the runner refuses to start: {exc}")]
    return engine.plan.rows()


def log_path_for(profile_path: Path) -> Path:
    """`profiles/cpu.yaml` → `profiles/cpu.all.log`."""
    return profile_path.with_name(f"{profile_path.stem}.all.log")


def keep_log(scratch: TextIO, target: Path) -> None:
    """Copy the run's log beside the profile: a temp file in the same folder, then an atomic rename."""
    scratch.flush()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            scratch.seek(0)
            shutil.copyfileobj(scratch, out)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def stage_line(run: StageRun, figure: str, width: int) -> str:
    """`verify-ops ok      61.2 s  ops 940 pass · 15 skip; compiled 15 pass` (a second line if needed)."""
    from bringup.terminal_text import markup_safe as escape

    if run.action != "ran":
        mark, style, seconds = "kept", "dim", "-"
    else:
        mark = "ok" if run.exit_code == 0 else f"exit {run.exit_code}"
        style, seconds = ("green" if run.exit_code == 0 else "red"), f"{run.seconds:.1f} s"
    indent = 11 + 7 + 8 + 2
    text = output.fit_lines(figure, 2, width - indent).replace("\n", "\n" + " " * indent)
    return f"{run.name:<11}[{style}]{mark:<7}[/]{seconds:>8}  {escape(text)}"


def run_stages(ctx: Any, common: list[str], model: Path | None, rerun: bool, skip: list[str], force: bool,
               strict: bool, show_lines: bool, scratch: TextIO, stages: list[Stage], level: int) -> list[StageRun]:
    """Each stage in turn, its stdout into `scratch` (the log); one line per stage on the terminal."""
    from bringup.cli.app import app
    from bringup.profiles.store import load_profile_or_none

    group = typer.main.get_command(app)
    runs: list[StageRun] = []
    spinner_nests = hasattr(err_console, "_live_stack")  # rich >= 14 lets a stage's own progress bar nest
    from bringup.profiles.store import set_stage_level

    for stage in stages:
        if stage.name in skip:
            continue
        before = load_profile_or_none(ctx.profile_path)
        if not rerun and done_at_level(before, stage.name, level):
            run = StageRun(stage.name, "skipped (complete)", 0, 0.0, "complete")
        else:
            extra = (["--force"] if force and stage.name == "devices" else []) + (
                ["--strict"] if strict and stage.name == "selftest" else [])
            start = time.perf_counter()
            spinner = (err_console.status(f"{stage.name}…") if show_lines and spinner_nests
                       else contextlib.nullcontext())
            with spinner, contextlib.redirect_stdout(scratch), output.into_log():
                code = run_stage(group, stage, common + extra, model)
            if ctx.profile_path.exists():
                set_stage_level(ctx.profile_path, stage.name, level)
            after = load_profile_or_none(ctx.profile_path)
            run = StageRun(stage.name, "ran", code, time.perf_counter() - start, stamp_status(after, stage.name))
            before = after
        runs.append(run)
        if show_lines:
            figure = stage_figure(run.name, before, ctx.selection.reason)
            console.print(stage_line(run, figure, output.terminal_width()), highlight=False)
    return runs


def command(
    device: DeviceOption = None,
    profile: ProfileOption = None,
    model: ModelOption = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="Run every stage again, even those already complete "
                                        "in the profile (verify-ops still resumes its own partial run).")] = False,
    only: Annotated[
        list[str] | None, typer.Option("--only", callback=name_list, help="Run only these stages (repeat or "
                                       f"comma-separate): {', '.join(STAGE_NAMES)}.")
    ] = None,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", callback=name_list, help="Leave out these stages (repeat or "
                                       "comma-separate).")
    ] = None,
    level: Annotated[int, typer.Option("--level", min=1, max=4, help=LEVEL_HELP)] = DEFAULT_LEVEL,
    soak_minutes: Annotated[float, typer.Option("--soak-minutes", min=0.0, help="Length of the level-4 soak.")
                            ] = DEFAULT_SOAK_MINUTES,
    strict: StrictOption = False,
    force: ForceOption = False,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Run the stages in order into one profile, resuming stages already complete, then summarise.

    Ends with one screen: one line per stage, the execution plan the runner would use, and where the
    profile and the log (each stage's full output) are, then the verdict: READY, READY WITH WARNINGS (n)
    or NOT READY (n failures), naming what to look at. Exit 1 when NOT READY or a stage failed, else 0.
    Example: `bringup all`, `bringup all --device cuda:1 --rerun`, `bringup all --only devices,probe`;
    `bringup all --device emu:0,emu:1` (or a family name) runs them on each device into its own profile.
    """
    from bringup.cli.commands.all_devices import devices_named, run_each
    from bringup.errors import BringupError

    several = devices_named(device, profile)
    if several is not None:
        raise typer.Exit(run_each(several))
    for flag, names in (("--only", only), ("--skip", skip)):
        unknown = sorted(set(names or []) - set(STAGE_NAMES))
        if unknown:
            raise BringupError(f"{flag} {unknown[0]!r} is not a stage; stages: {', '.join(STAGE_NAMES)}")
    skip = [*(skip or []), *(name for name in STAGE_NAMES if only and name not in only)]
    terminal = CompactWarnings()
    with tempfile.TemporaryFile("w+", encoding="utf-8", suffix=".all.log") as scratch:
        log_path: Path | None = None
        try:
            with capture_to_file(scratch, verbose, terminal):
                ctx = stage_context(device, profile, json_out, verbose, strict=strict, force=force)
                log_path = log_path_for(ctx.profile_path)
                if not json_out:
                    console.print(f"bringup all on [bold]{markup_safe(ctx.info.id)}[/] "
                                  f"({markup_safe(ctx.info.name)}) → {markup_safe(ctx.profile_path)}",
                                  highlight=False)
                runs, facts, plan, verdict = run_everything(ctx, model, rerun, skip or [], force, strict, verbose,
                                                            json_out, scratch,
                                                            stages_for(level, soak_minutes, model is not None), level)
                artifacts = write_artifacts(ctx.profile_path, scratch)
        finally:
            if log_path is not None:
                keep_log(scratch, log_path)
    if json_out:
        print_json("all", {"profile": str(ctx.profile_path), "stages": [r.__dict__ for r in runs], "facts": facts,
                           "plan": [dict(zip(("setting", "value", "evidence"), row)) for row in plan], **artifacts,
                           "verdict": verdict.to_document()})
    else:
        if any(r.action != "ran" for r in runs):
            console.print("[dim]kept: complete in the profile already (--rerun runs them again)[/]", highlight=False)
        from bringup.cli.render.verdict_line import verdict_markup

        render_end(ctx.profile_path, log_path, plan, terminal.suppressed, artifacts)
        console.print(verdict_markup(verdict), highlight=False)
    if verdict.exit_code != 0 or any(r.exit_code != 0 for r in runs):
        raise typer.Exit(1)


def run_everything(ctx: Any, model: Path | None, rerun: bool, skip: list[str], force: bool, strict: bool,
                   verbose: bool, json_out: bool, scratch: TextIO, stages: list[Stage],
                   level: int) -> tuple[list[StageRun], dict, list, Verdict]:
    """The stages with their stdout in the log, then the facts, the plan and the verdict from the final profile."""
    from bringup.profiles.schema import Profile
    from bringup.profiles.store import load_profile_or_none
    from bringup.profiles.verdict import verdict_of

    common = ["--device", ctx.info.id, "--profile", str(ctx.profile_path), "--details"] + (["-v"] if verbose else [])
    output.transient_progress = True
    terminal_width = console._width  # the log gets wide tables; the terminal's width comes back after
    console.width = LOG_WIDTH
    try:
        show = not json_out and not output.quiet
        runs = run_stages(ctx, common, model, rerun, skip, force, strict, show, scratch, stages, level)
        final = load_profile_or_none(ctx.profile_path)
        spinner = err_console.status("planning…") if show else contextlib.nullcontext()
        with spinner, contextlib.redirect_stdout(scratch), output.into_log():
            plan = runner_plan(ctx.profile_path, ctx.info.id, model)
    finally:
        output.transient_progress = False
        console._width = terminal_width
    log.info("plan: %s", plan_line(plan))
    verdict = verdict_of(final or Profile())
    log.info("verdict: %s", verdict.line())
    return runs, summary_facts(final), plan, verdict


def write_artifacts(profile_path: Path, scratch: TextIO) -> dict[str, Any]:
    """The report beside the profile and a reproducer for every failing case in `<stem>.repro/`; a failure to
    write one is a WARNING (the profile stands), not the end of the run."""
    from bringup.errors import BringupError
    from bringup.probes.ops.repro import write_reproducers
    from bringup.report import write_report

    written: dict[str, Any] = {"report": None, "reproducers": None, "reproducer_files": 0}
    with contextlib.redirect_stdout(scratch):
        try:
            written["report"] = str(write_report(profile_path))
        except (BringupError, OSError) as exc:
            log.warning("report not written: %s", exc)
        try:
            files = write_reproducers(profile_path, profile_path.with_suffix(".repro"))
            written["reproducers"] = str(profile_path.with_suffix(".repro"))
            written["reproducer_files"] = sum(f.suffix == ".py" for f in files)
        except (BringupError, OSError) as exc:
            log.warning("reproducers not written: %s", exc)
    return written


def render_end(profile_path: Path, log_path: Path | None, plan: list[tuple[str, str, str]], suppressed: int,
               artifacts: dict[str, Any]) -> None:
    plain = output.plain
    console.print(plain(output.fit_lines("plan: " + plan_line(plan), 4)), highlight=False)
    console.print(plain(f"profile: {profile_path}"), highlight=False)
    if artifacts["report"]:
        console.print(plain(f"report:  {artifacts['report']}"), highlight=False)
    if artifacts["reproducer_files"]:
        console.print(plain(f"repro:   {artifacts['reproducers']} ({artifacts['reproducer_files']} standalone file(s), "
                            "one per failing case)"), highlight=False)
    more = f"; {suppressed} more warning(s) there" if suppressed else ""
    console.print(plain(f"log:     {log_path} (each stage's full output{more})"), highlight=False)
    console.print(plain("details: bringup profile show " + str(profile_path)), highlight=False)
    console.print(plain(f"deploy:  bringup export --engine vllm|llama.cpp --profile {profile_path} (after bringup tune "
                        "--model M: the plan's sizes too)"), highlight=False)
    sys.stdout.flush()
