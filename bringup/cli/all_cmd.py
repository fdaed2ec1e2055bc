"""`bringup all`: devices → probe → verify-ops → bench --quick → selftest into one profile, then a summary."""

import contextlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import click
import typer
from rich.table import Table

from bringup.cli.common import (
    DeviceOption,
    ForceOption,
    JsonOption,
    ProfileOption,
    StrictOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.generate import ModelOption
from bringup.cli.output import console, print_json
from bringup.log import get_logger
from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile_or_none

log = get_logger("all")


@dataclass
class Stage:
    name: str
    args: list[str]
    takes_model: bool = False


STAGES = [
    Stage("devices", ["devices"]),
    Stage("probe", ["probe"]),
    Stage("verify-ops", ["verify-ops", "--resume", "--compiled"]),
    Stage("bench", ["bench", "--quick", "--only", "matmul,bandwidth,transfer,dispatch,attention,ops,e2e"]),
    Stage("selftest", ["selftest"], takes_model=True),
]
STAGE_NAMES = [s.name for s in STAGES]


@dataclass
class StageRun:
    name: str
    action: str  # ran | skipped
    exit_code: int
    seconds: float
    status: str  # the profile stamp after the run


def run_stage(group: click.Group, stage: Stage, common: list[str], model: Path | None) -> int:
    args = [*stage.args, *common]
    if stage.takes_model and model is not None:
        args += ["--model", str(model)]
    log.info("stage %s: bringup %s", stage.name, " ".join(args))
    try:
        result = group.main(args, standalone_mode=False, prog_name="bringup")
    except click.exceptions.Exit as exc:
        return exc.exit_code
    return int(result or 0)


def stamp_status(profile: Profile | None, name: str) -> str:
    stamp = profile.stages.get(name) if profile else None
    return stamp.status if stamp else "missing"


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
    from bringup.runner.engine.engine import EngineOptions, LLMEngine

    engine = LLMEngine.create(EngineOptions(model_dir=model, profile_path=profile_path, device=device,
                                            max_num_seqs=8, max_model_len=512))
    return engine.plan.rows()


def render(runs: list[StageRun], facts: dict[str, Any], plan: list[tuple[str, str, str]], path: Path) -> None:
    table = Table(title=f"bringup all → {path}", title_justify="left")
    for col in ("stage", "action", "exit", "profile stamp", "s"):
        table.add_column(col)
    for r in runs:
        style = "green" if r.exit_code == 0 else "red"
        table.add_row(r.name, r.action, f"[{style}]{r.exit_code}[/]", r.status, f"{r.seconds:.1f}")
    console.print(table)
    for key, value in facts.items():
        text = ", ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) else str(value)
        console.print(f"[bold]{key}[/]: {text}", highlight=False)
    plan_table = Table(title="execution plan the runner would use (built-in model unless --model)",
                       title_justify="left")
    for col in ("setting", "value", "evidence"):
        plan_table.add_column(col, overflow="fold")
    for row in plan:
        plan_table.add_row(*row)
    console.print(plan_table)


def command(
    device: DeviceOption = None,
    profile: ProfileOption = None,
    model: ModelOption = None,
    rerun: Annotated[bool, typer.Option("--rerun", help="Run every stage again, even those already complete "
                                        "in the profile (verify-ops still resumes its own partial run).")] = False,
    skip: Annotated[
        list[str] | None, typer.Option("--skip", help=f"Leave out a stage (repeatable): {', '.join(STAGE_NAMES)}.")
    ] = None,
    strict: StrictOption = False,
    force: ForceOption = False,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Run the stages in order into one profile, resuming stages already complete, then summarise.

    Ends with one screen: what ran, what passed or failed, and the execution plan the runner would use.
    Exit 1 when any stage found failures. Example: `bringup all`, `bringup all --device cuda:1 --rerun`.
    """
    from bringup.cli.app import app
    from bringup.errors import BringupError

    unknown = sorted(set(skip or []) - set(STAGE_NAMES))
    if unknown:
        raise BringupError(f"--skip {unknown[0]!r} is not a stage; stages: {', '.join(STAGE_NAMES)}")
    ctx = stage_context(device, profile, json_out, verbose, strict=strict, force=force)
    common = ["--device", ctx.info.id, "--profile", str(ctx.profile_path)] + (["-v"] if verbose else [])
    group = typer.main.get_command(app)
    runs: list[StageRun] = []
    for stage in STAGES:
        if stage.name in (skip or []):
            continue
        before = load_profile_or_none(ctx.profile_path)
        if not rerun and stamp_status(before, stage.name) == "complete":
            runs.append(StageRun(stage.name, "skipped (complete)", 0, 0.0, "complete"))
            continue
        extra = (["--force"] if force and stage.name == "devices" else []) + (["--strict"] if strict and
                                                                              stage.name == "selftest" else [])
        start = time.perf_counter()
        quiet_stdout = contextlib.redirect_stdout(sys.stderr) if json_out else contextlib.nullcontext()
        with quiet_stdout:
            code = run_stage(group, stage, common + extra, model)
        after = load_profile_or_none(ctx.profile_path)
        runs.append(StageRun(stage.name, "ran", code, time.perf_counter() - start, stamp_status(after, stage.name)))
    final = load_profile_or_none(ctx.profile_path)
    facts = summary_facts(final)
    plan = runner_plan(ctx.profile_path, ctx.info.id, model)
    if json_out:
        print_json({"profile": str(ctx.profile_path), "stages": [r.__dict__ for r in runs], "facts": facts,
                    "plan": [dict(zip(("setting", "value", "evidence"), row)) for row in plan]})
    else:
        render(runs, facts, plan, ctx.profile_path)
    if any(r.exit_code != 0 for r in runs):
        raise typer.Exit(1)
