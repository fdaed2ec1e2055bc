"""`bringup tune`: the served model's plan measured with care (several start-ups, their timings combined, the
machine's noise shown) and recorded in the profile's `models` section, so generate, serve, selftest and eval on
that model reuse it without timing."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated

import typer

from bringup.cli.common import OVERWRITES_TOO, DetailsOption, JsonOption, VerboseOption, stage_context
from bringup.cli.engine_flags import ENGINE_OPTIONS, takes_engine_options
from bringup.cli.output import console, plain, print_json, progress
from bringup.log import get_logger
from bringup.runner.engine.options import CONTEXT, MODEL, TARGET, EngineOptions

log = get_logger("tune")

if TYPE_CHECKING:
    from bringup.profiles.sections.models import ModelPlanRecord


@takes_engine_options(MODEL, CONTEXT, TARGET, more_help={"force": OVERWRITES_TOO})
def command(
    options: EngineOptions = ENGINE_OPTIONS,
    runs: Annotated[int, typer.Option("--runs", min=2, max=20, help="Start-ups to measure and combine: more runs "
                                      "show the machine's noise better.")] = 3,
    replace: Annotated[bool, typer.Option(
        "--replace", help="Record this run's timings even when they ran on a contended machine (its timed threads "
                          "got under 85% of the CPU) and the profile holds a record of this model timed on a quiet "
                          "one; without it the quiet record is kept.")] = False,
    json: JsonOption = False,
    verbose: VerboseOption = False,
    details: DetailsOption = False,
) -> None:
    """Measure the served model's plan with care and record it: start-up timed --runs times (layouts, kernels,
    decode steps by batch), each timing's fastest run kept (a neighbour's work only adds time) with its noise across
    the runs, and the plan those give — with every timing behind it — written to the profile's `models` section.
    generate, serve, selftest and eval on this model then replay it after their correctness checks, timing nothing.
    A run whose timed threads got under 85% of the CPU (a contended machine) does not replace a record timed on a
    quiet one (see --replace). Example: bringup tune --model ./SmolLM2-135M-Instruct
    """
    from bringup.profiles.store import update_profile
    from bringup.runner.engine.tuning import tune
    from bringup.runner.plan.record.cleaner import cleaner_record

    force = options.force
    stage = stage_context(options.device, options.profile_path, json, verbose, options.strict, force)
    options = dataclasses.replace(options, profile_path=stage.profile_path, device=str(stage.device))
    with progress(json) as bar:
        task = bar.add_task("tune: start-ups timed", total=runs)
        engine, key, record = tune(options, runs, on_run=lambda done: bar.update(task, completed=done))

    kept_why: list[str] = []

    def mutate(p) -> None:  # type: ignore[no-untyped-def]
        earlier = (p.models or {}).get(key)
        kept, why = (record, None) if replace else cleaner_record(record, earlier)
        if why is not None:
            kept_why.append(why)
        p.models = {**(p.models or {}), key: kept}

    update_profile(stage.profile_path, stage.info, mutate, stage="tune", status="complete", force=force)
    for why in kept_why:
        log.warning("tune record for %s not replaced: %s", key, why)
    if json:
        print_json("tune", {"profile": str(stage.profile_path), "key": key, "recorded": not kept_why,
                            "not_recorded_because": kept_why[0] if kept_why else None,
                            **record.model_dump(mode="json")})
        return
    if details:
        from bringup.cli.commands.generate import print_plan

        print_plan(engine)
    print_summary(key, record)
    if kept_why:
        console.print(plain(f"NOT recorded: the earlier record in {stage.profile_path} under {key!r} stands "
                            "(see the warning above)"), highlight=False)
    else:
        console.print(plain(f"recorded in {stage.profile_path} under {key!r}; later starts of this model replay it"),
                      highlight=False)


def print_summary(key: str, record: ModelPlanRecord) -> None:
    from rich.table import Table

    from bringup.runner.plan.noise import contended
    from bringup.runner.plan.settings import TUNE_ORDER

    table = Table(title=plain(f"tune — {key} on {record.device} ({record.dtype}), {record.runs} runs"),
                  title_justify="left")
    table.add_column("setting")
    table.add_column("choice", overflow="fold")
    for setting in TUNE_ORDER:
        table.add_row(plain(setting), plain(record.shown(setting) or "not recorded"))
    console.print(table)
    if record.noise:
        worst = max(record.noise, key=record.noise.__getitem__)
        console.print(plain(f"machine noise across the runs: largest floor noise {record.noise[worst]:.0%} "
                            f"({worst}); a choice inside its noise keeps the default"), highlight=False)
    if record.cpu_share is not None:
        console.print(plain(f"the timed threads had at least {record.cpu_share:.0%} of the CPU"
                            + (" (contended: another process was running)" if contended(record.cpu_share) else "")),
                      highlight=False)
