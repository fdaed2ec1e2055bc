"""`bringup probe`: executed capability checks into the profile's `capabilities` section."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bringup.cli.checks import name_list, positive_seconds
from bringup.cli.common import (
    DetailsOption,
    DeviceOption,
    ForceOption,
    JsonOption,
    ProfileOption,
    StrictOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.output import console, plain, print_json, progress
from bringup.cli.render.check_results import capabilities_table, print_not_passing, print_section_line

if TYPE_CHECKING:
    from pathlib import Path

    from bringup.cli.common import StageContext
    from bringup.fallbacks import FallbackRecorder
    from bringup.profiles.schema import Profile
    from bringup.profiles.verdict import Check


def run_checks(profile_path: Path, done: dict[str, dict[str, Any]]) -> list[Check]:
    """This run's capabilities as the verdict grades them, read back from the profile they were written to (the
    backend's not-applicable facts and the op cases explaining a dtype live there)."""
    from bringup.profiles.store import load_profile
    from bringup.profiles.verdict.capability_checks import capability_checks

    profile = load_profile(profile_path)
    graded = {c.name: c for c in capability_checks(profile.capabilities, profile.ops)}
    return [graded[check_id] for check_id in done if check_id in graded]


def command(
    device: DeviceOption = None,
    profile: ProfileOption = None,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
    force: ForceOption = False,
    strict: StrictOption = False,
    only: Annotated[Optional[list[str]], typer.Option(
        "--only", callback=name_list, help="Run only these groups or check ids (repeat or comma-separate), e.g. "
        "--only dtypes,attention.sdpa_flash.")] = None,
    skip: Annotated[Optional[list[str]], typer.Option(
        "--skip", callback=name_list, help="Leave out these groups or check ids (repeat or comma-separate).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds a check may take before it is "
                                           "recorded as unknown and its worker killed.",
                                           callback=positive_seconds)] = 180.0,
    isolate: Annotated[bool, typer.Option("--isolate/--no-isolate", help="Run checks in a worker process "
                                          "(a crash or hang costs one check).")] = True,
    list_checks: Annotated[bool, typer.Option("--list", help="List the checks and exit.")] = False,
    details: DetailsOption = False,
) -> None:
    """Probe what the device can really do: each capability is an executed check with evidence.

    The profile records supported (a check ran and matched a float64 reference), unsupported (with the reason)
    or unknown (the check could not decide, e.g. it timed out); the terminal grades them as every stage does:
    pass, warn (unsupported or unknown), skip (not applicable: the backend declares no such thing here).
    Results are written as they arrive; the run ends with `probe: n pass, n warn, n fail, n skip`. A check that
    takes a fallback (a compile backend the device cannot use: the eager path instead) logs it at WARNING and
    counts it; --strict makes that an error, after the result is written.

    Example: `bringup probe`, `bringup probe --only dtypes --json`, `bringup probe --skip compile`.
    """
    from bringup.fallbacks import FallbackRecorder
    from bringup.probes.capabilities.registry import all_check_ids, select_checks

    if list_checks:
        ids = all_check_ids()
        print_json("probe-list", {"checks": ids}) if json_out else console.print("\n".join(ids), highlight=False)
        return
    check_ids = select_checks(only, skip)
    ctx = stage_context(device, profile, json_out, verbose, strict=strict, force=force)
    fallbacks = FallbackRecorder(strict=strict)
    done = probe_into_profile(ctx, check_ids, "partial" if (only or skip) else "complete", fallbacks,
                              isolate=isolate, timeout_s=timeout)
    if json_out:
        print_json("probe", {"device": ctx.info.id, "profile": str(ctx.profile_path), "capabilities": done,
                             "fallbacks": fallbacks.summary()})
        return
    checks = run_checks(ctx.profile_path, done)
    if details:
        console.print(capabilities_table(checks, {name: r.get("seconds", 0.0) for name, r in done.items()}))
    else:
        print_not_passing(checks)
    console.print(plain(f"written to {ctx.profile_path}" + ("" if details else " (--details: evidence per check)")),
                  highlight=False)
    print_section_line("probe", checks)


def probe_into_profile(ctx: StageContext, check_ids: list[str], status: str, fallbacks: FallbackRecorder, *,
                       isolate: bool, timeout_s: float) -> dict[str, dict[str, Any]]:
    """Run the checks, writing each result into the profile as it arrives (stage partial), then stamp the stage
    `status`; a check's fallback is recorded in `fallbacks`. Returns the results by check id."""
    from bringup.backends.registry import backend_for
    from bringup.probes.capabilities.stage import merge_into, record_fallback, run_probe
    from bringup.profiles.store import now_iso, update_profile
    from bringup.profiles.verdict.capability_checks import capability_result

    started = now_iso()
    declared_absent = dict(backend_for(ctx.info.id).not_applicable)

    def checkpoint(results: dict[str, dict[str, Any]], stage_status: str) -> None:
        def record(p: Profile) -> None:
            p.capabilities = merge_into(p.capabilities, results)
            p.capabilities.not_applicable = declared_absent

        update_profile(ctx.profile_path, ctx.info, record, stage="probe", status=stage_status,  # type: ignore[arg-type]
                       force=ctx.force, started=started)

    done: dict[str, dict[str, Any]] = {}
    with progress(ctx.json) as bar:
        task = bar.add_task(f"probing {ctx.info.id}", total=len(check_ids))

        def on_result(check_id: str, result: dict[str, Any]) -> None:
            done[check_id] = result
            checkpoint({check_id: result}, "partial")
            record_fallback(check_id, result, fallbacks)
            graded = capability_result(result["status"], check_id in declared_absent)
            bar.update(task, advance=1, description=f"probing {ctx.info.id}: {check_id} {graded}")

        run_probe(check_ids, ctx.info.id, isolate=isolate, timeout_s=timeout_s, on_result=on_result)
    checkpoint({}, status)
    return done
