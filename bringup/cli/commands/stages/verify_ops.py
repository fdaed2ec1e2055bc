"""`bringup verify-ops`: op-by-op numerics against a float64 CPU reference, crash-isolated and resumable."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bringup.cli.checks import name_list, non_negative_seconds, positive_seconds
from bringup.cli.common import (
    DetailsOption,
    DeviceOption,
    ForceOption,
    JsonOption,
    ProfileOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.output import console, plain, print_json, progress
from bringup.cli.render.check_results import print_not_passing, print_section_line
from bringup.errors import BringupError
from bringup.log import configure_logging, get_logger

if TYPE_CHECKING:  # the stage's modules import torch: they load when the command runs, not for --help
    from bringup.probes.ops.stage import Plan
    from bringup.profiles.schema import Profile
    from bringup.profiles.sections.ops import VerifyOpsRecord
    from bringup.profiles.verdict import Check

log = get_logger("verify-ops")


def command(
    device: DeviceOption = None,
    profile: ProfileOption = None,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
    force: ForceOption = False,
    list_catalog: Annotated[bool, typer.Option("--list", help="Print the op catalog, blocks and tolerance "
                                               "table, then exit.")] = False,
    op: Annotated[Optional[list[str]], typer.Option(
        "--only", "--op", callback=name_list, help="Only these ops or compiled blocks (repeat or comma-separate; "
        "--op is the older spelling).")] = None,
    skip: Annotated[Optional[list[str]], typer.Option(
        "--skip", callback=name_list, help="Leave out these ops or compiled blocks (repeat or comma-separate).")
    ] = None,
    dtype: Annotated[Optional[list[str]], typer.Option("--dtype", help="Only this dtype (repeatable), e.g. "
                                                       "bfloat16.")] = None,
    pattern: Annotated[Optional[str], typer.Option("-k", help="Only cases whose 'op[dtype] case' (or "
                                                   "'block[dtype]') matches this regular expression.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds one case may take before it is recorded "
                                           "as timeout and its worker killed.", callback=positive_seconds)] = 300.0,
    isolate: Annotated[bool, typer.Option("--isolate/--no-isolate", help="Run cases in a worker subprocess "
                                          "(a crash or hang costs one case) or in-process (faster).")] = True,
    resume: Annotated[bool, typer.Option("--resume", help="Skip cases the profile already records.")] = False,
    compiled: Annotated[bool, typer.Option("--compiled", help="Also compare eager with torch.compile: the "
                                           "composite blocks, plus the selected op cases when --op/-k is "
                                           "given.")] = False,
    compile_backend: Annotated[str, typer.Option("--compile-backend", help="torch.compile backend to "
                                                 "verify.")] = "inductor",
    compile_cache: Annotated[Optional[Path], typer.Option("--compile-cache", help="Inductor cache directory "
                                                          "(default: TORCHINDUCTOR_CACHE_DIR, else "
                                                          ".inductor-cache next to the profile).")] = None,
    checkpoint_every: Annotated[float, typer.Option("--checkpoint-every", help="Seconds between profile "
                                                    "writes, 0 = after every case (crashes and timeouts are "
                                                    "written at once).", callback=non_negative_seconds)] = 1.0,
    details: DetailsOption = False,
    repro_dir: Annotated[Optional[Path], typer.Option("--repro-dir", help="Write one standalone, torch-only "
                                                      "Python reproducer per failing case into this directory, "
                                                      "with an index (README.md).")] = None,
    model: Annotated[Optional[Path], typer.Option("--model", help="A Hugging Face model directory: run the ops "
                                                  "the model runs at its own shapes and dtype, read from its "
                                                  "config.json (hidden size, heads, head_dim, intermediate, "
                                                  "experts, vocabulary, context lengths up to its maximum, "
                                                  "capped where the float64 reference would be too costly: the "
                                                  "label says so). Cases are labelled 'model: ...'; --op, "
                                                  "--dtype and -k filter them; --dtype overrides the model's "
                                                  "torch_dtype.")] = None,
) -> None:
    """Verify every op in the catalog, dtype by dtype, against the same op in float64 on the CPU.

    Each case records max abs / max rel error, NMSE and the worst index, and passes when the result is
    finite where the reference is and within the dtype's tolerance; out= variants also write into a
    sentinel-guarded buffer to catch out-of-bounds writes. The profile records pass, fail, error, unsupported,
    crashed or timeout; the terminal grades them as every stage does: pass, fail (fail, error, crashed, timeout),
    warn (unsupported), skip (not applicable to this device), and ends with
    `verify-ops: n pass, n warn, n fail, n skip`. Results are checkpointed into the profile as they
    arrive; `--resume` continues an interrupted run. Exit code 1 when a case fails, errors, crashes or times
    out, or when nothing could be verified.

    With `--model DIR`, only cases at that model's shapes run (see --model).

    Examples: `bringup verify-ops`, `bringup verify-ops --only softmax --dtype bfloat16`,
    `bringup verify-ops --skip multinomial`,
    `bringup verify-ops -k 'matmul|linear' --compiled`, `bringup verify-ops --resume`,
    `bringup verify-ops --model ~/models/Qwen3-30B-A3B --op moe_router`.
    """
    if model is None:
        _run(device, profile, json_out, verbose, force, list_catalog, op, dtype, pattern, timeout, isolate, resume,
             compiled, compile_backend, compile_cache, checkpoint_every, details, repro_dir, model_only=False,
             skip=skip)
        return
    from bringup.probes.ops.catalog import MODEL_ENV
    from bringup.probes.ops.model_shapes import ModelConfigError, read_model_shapes

    configure_logging(verbose)
    try:
        shapes = read_model_shapes(model)
    except ModelConfigError as exc:
        raise BringupError(str(exc)) from None
    if not dtype and shapes.dtype:
        dtype = [shapes.dtype]
    log.info("verify-ops --model %s: %s; dtypes %s", model, shapes.summary(),
             ", ".join(dtype) if dtype else "the catalog's defaults (config.json names no torch_dtype)")
    saved = os.environ.get(MODEL_ENV)
    os.environ[MODEL_ENV] = shapes.to_json()  # this process's catalog and every worker's get the model's cases
    try:
        _run(device, profile, json_out, verbose, force, list_catalog, op, dtype, pattern, timeout, isolate, resume,
             compiled, compile_backend, compile_cache, checkpoint_every, details, repro_dir, model_only=True,
             skip=skip)
    finally:
        if saved is None:
            os.environ.pop(MODEL_ENV, None)
        else:
            os.environ[MODEL_ENV] = saved


def _run(device, profile, json_out: bool, verbose: bool, force: bool, list_catalog: bool, op, dtype, pattern,
         timeout: float, isolate: bool, resume: bool, compiled: bool, compile_backend: str, compile_cache,
         checkpoint_every: float, details: bool, repro_dir, *, model_only: bool, skip: list[str] | None) -> None:
    from bringup.probes.ops.stage import STAGE, drop_recorded, key_of, merge_results, records_for, summarize
    from bringup.profiles.store import load_profile_or_none, now_iso, update_profile

    if list_catalog:
        _list_catalog(json_out, verbose, model_only)
        return
    plan = _planned(op, dtype, pattern, compiled, compile_backend, model_only=model_only, skip=skip)
    if repro_dir is not None:  # a bad directory is a usage error before any case runs
        from bringup.probes.ops.repro import check_directory

        check_directory(repro_dir)
    ctx = stage_context(device, profile, json_out, verbose, force=force)
    all_keys = [key_of(t) for t in plan.tasks]
    existing = load_profile_or_none(ctx.profile_path) if resume else None
    if resume:
        plan = drop_recorded(plan, existing)
        log.info("resume: %d of %d cases already recorded in %s, %d to run", len(plan.skipped), len(all_keys),
                 ctx.profile_path, len(plan.tasks))
    from bringup.probes.ops.stage import without_unsupported_backend

    plan, not_compiled = without_unsupported_backend(plan, existing or load_profile_or_none(ctx.profile_path))
    if not_compiled:
        log.warning("%d compiled comparison(s) not run: %s", len(not_compiled), not_compiled[0].message)
    cache_dir = _cache_dir(compile_cache, ctx.profile_path) if plan.compiled_tasks else None
    log.info("verify-ops on %s: %d op cases, %d compiled and %d graph-replay comparisons, %s", ctx.info.id,
             len(plan.op_tasks), len(plan.compiled_tasks), len(plan.replay_tasks),
             "isolated worker" if isolate else "in-process (--no-isolate)")

    started = now_iso()

    def write(batch: list[VerifyOpsRecord], final: bool) -> None:
        def mutate(p: Profile) -> None:
            merge_results(p, batch)
        update_profile(ctx.profile_path, ctx.info, mutate, stage=STAGE,
                       status="complete" if final else "partial", force=force, started=started)

    if not_compiled:
        write(not_compiled, final=not plan.tasks)
    results = not_compiled + (_execute(plan.tasks, ctx.info.id, isolate, timeout, cache_dir, checkpoint_every,
                                       json_out, write) if plan.tasks else [])
    previous = records_for(plan.skipped, existing)
    everything = previous + results
    summary = summarize(everything)
    _report(everything, summary, json_out, ctx.info.id, ctx.profile_path, details)
    if repro_dir is not None:
        from bringup.probes.ops.repro import write_reproducer_dir

        repro = write_reproducer_dir(everything, repro_dir, ctx.info.id)
        log.info("%s", repro.line())
        if not json_out:
            console.print(plain(repro.line()))
    raise typer.Exit(summary.exit_code)


def _list_catalog(json_out: bool, verbose: bool, model_only: bool) -> None:
    """--list: the catalog's cases (at the model's shapes with --model), as tables or JSON."""
    from bringup.cli.render.verify_ops import catalog_json, catalog_tables
    from bringup.probes.ops.catalog import load_catalog

    configure_logging(verbose)
    try:
        catalog = load_catalog()
    except ValueError as exc:
        raise BringupError(str(exc)) from None
    if model_only:
        from bringup.probes.ops.catalog import model_only_catalog

        catalog = model_only_catalog(catalog)
    if json_out:
        print_json("verify-ops-list", catalog_json(catalog))
    else:
        for table in catalog_tables(catalog, verbose):
            console.print(table)


def _planned(op: list[str] | None, dtype: list[str] | None, pattern: str | None, compiled: bool,
             compile_backend: str, *, model_only: bool, skip: list[str] | None) -> Plan:
    """The cases the filters choose; BringupError when they choose none."""
    from bringup.probes.ops.stage import plan_tasks

    try:
        plan = plan_tasks(op, dtype, pattern, compiled=compiled, backend=compile_backend, model_only=model_only,
                          skip=skip)
    except ValueError as exc:
        raise BringupError(str(exc)) from None
    if not plan.tasks and model_only:
        raise BringupError("no cases at the model's shapes match the filters (--only/--skip/--dtype/-k); `bringup "
                           "verify-ops --model DIR --list` shows them")
    if not plan.tasks:
        raise BringupError("no cases match the filters (--only/--skip/--dtype/-k); `bringup verify-ops --list` shows "
                           "the catalog")
    return plan


def _cache_dir(option: Path | None, profile_path: Path) -> Path:
    if option is not None:
        return option
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
    return profile_path.parent / ".inductor-cache"


def _execute(tasks: list[dict[str, Any]], device_id: str, isolate: bool, timeout: float, cache_dir: Path | None,
             checkpoint_every: float, json_out: bool, write) -> list[VerifyOpsRecord]:
    from bringup.probes.ops.runner import Checkpointer, run_tasks
    from bringup.probes.ops.stage import worker_env
    from bringup.probes.ops.worker import InProcessExecutor, IsolatedExecutor, WorkerStartError

    saved_cache_env = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache_dir is not None:
        cache_dir.mkdir(parents=True, exist_ok=True)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)  # in-process runs; the worker gets it via env
        log.info("inductor cache: %s", cache_dir)
    executor = (IsolatedExecutor(device_id, timeout, worker_env(cache_dir)) if isolate
                else InProcessExecutor(device_id))
    checkpointer = Checkpointer(lambda batch, final: write(batch, final), interval_s=checkpoint_every)
    results: list[VerifyOpsRecord] = []
    try:
        with progress(json_out) as bar:
            bar_task = bar.add_task("verify-ops", total=len(tasks))

            def on_start(task: dict[str, Any], label: str) -> None:
                bar.update(bar_task, description=label[:70])

            def on_result(task: dict[str, Any], result: VerifyOpsRecord) -> None:
                results.append(result)
                checkpointer.add(result)
                if result.failing:
                    log.warning("%s: %s %s", label_of(result), result.status, result.message or "")
                bar.advance(bar_task)

            run_tasks(tasks, executor, on_result, on_start)
    except WorkerStartError as exc:
        checkpointer.flush(final=False)
        raise BringupError(str(exc)) from None
    except BaseException:
        checkpointer.flush(final=False)  # keep what finished; the stage stays `partial`
        raise
    finally:
        executor.close()
        if saved_cache_env is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = saved_cache_env
    checkpointer.flush(final=True)
    return results


def label_of(record: VerifyOpsRecord) -> str:
    from bringup.profiles.sections.graph_replay import GraphReplayRecord
    from bringup.profiles.sections.ops import OpCaseRecord

    if isinstance(record, OpCaseRecord):
        return f"{record.op}[{record.dtype}] {record.case}"
    if isinstance(record, GraphReplayRecord):
        return f"graph replay {record.target}[{record.dtype}]"
    return f"compiled {record.target}[{record.dtype}] {record.case or ''}".rstrip()


def graded_records(results: list[VerifyOpsRecord], profile_path: Path) -> list[tuple[VerifyOpsRecord, Check]]:
    """Each record with its check, graded by the verdict (the backend's not-applicable facts from the profile)."""
    from bringup.profiles.sections.graph_replay import GraphReplayRecord
    from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
    from bringup.profiles.store import load_profile_or_none
    from bringup.profiles.verdict.graph_replay import replay_checks
    from bringup.profiles.verdict.run_checks import compiled_record_checks, not_applicable_of, op_record_checks

    written = load_profile_or_none(profile_path)
    declared = not_applicable_of(written) if written is not None else {}
    cases = [r for r in results if isinstance(r, OpCaseRecord)]
    compared = [r for r in results if isinstance(r, CompiledRecord)]
    replayed = [r for r in results if isinstance(r, GraphReplayRecord)]
    return [*zip(cases, op_record_checks(cases, declared)), *zip(compared, compiled_record_checks(compared)),
            *zip(replayed, replay_checks(replayed))]


def _report(results: list[VerifyOpsRecord], summary, json_out: bool, device_id: str, profile_path: Path,
            details: bool = False) -> None:
    from bringup.cli.render.placement import placement_json, placement_lines, placement_table
    from bringup.cli.render.verify_ops import (
        compiled_table,
        failing_table,
        matrix_table,
        not_verified_table,
        replay_table,
    )
    from bringup.profiles.sections.graph_replay import GraphReplayRecord
    from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
    from bringup.profiles.verdict.host_fallback import host_fallback_checks

    cases = [r for r in results if isinstance(r, OpCaseRecord)]
    if json_out:
        compared = [r for r in results if isinstance(r, CompiledRecord)]
        replayed = [r for r in results if isinstance(r, GraphReplayRecord)]
        placement = placement_json(cases)
        print_json("verify-ops", {"device": device_id, "profile": str(profile_path), "verified": summary.verified,
                    "summary": {"ops": dict(summary.op_counts), "compiled": dict(summary.compiled_counts),
                                "graph_replay": dict(summary.replay_counts), "runs_on": placement["runs_on"]},
                    "host_fallback_ops": placement["host_fallback_ops"],
                    "cases": [r.model_dump() for r in cases],
                    "compiled": [r.model_dump() for r in compared],
                    "graph_replay": [r.model_dump() for r in replayed]})
        return
    graded = graded_records(results, profile_path)
    checks = [check for _, check in graded]
    if not details:
        print_not_passing(checks, 4)
    for line in placement_lines(cases):
        console.print(line, highlight=False)
    graded_cases = [(r, c) for r, c in graded if isinstance(r, OpCaseRecord)]
    graded_compiled = [(r, c) for r, c in graded if isinstance(r, CompiledRecord)]
    if details and graded_cases:
        console.print(matrix_table(graded_cases))
    graded_replay = [(r, c) for r, c in graded if isinstance(r, GraphReplayRecord)]
    if details and graded_compiled:
        console.print(compiled_table(graded_compiled))
    if graded_replay:  # a handful of rows, each a decision the runner's graphs rest on: always shown
        console.print(replay_table(graded_replay))
    not_verified = not_verified_table(graded) if details else None
    if not_verified is not None:
        console.print(not_verified)
    if details and summary.failing:
        console.print(failing_table(summary.failing))
    fallbacks = placement_table(cases) if details else None
    if fallbacks is not None:
        console.print(fallbacks)
    if not summary.verified:
        console.print("[red]nothing verified: every case was unsupported or failed[/]", highlight=False)
    console.print(plain(f"written to {profile_path}" + ("" if details else " (--details: full tables)")),
                  highlight=False)
    print_section_line("verify-ops", [*checks, *host_fallback_checks(cases)])
