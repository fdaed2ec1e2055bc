"""`bringup verify-collectives`: torch.distributed collectives -- exact correctness and bandwidth."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bringup.cli.checks import at_least_one, at_least_zero, positive_seconds
from bringup.cli.common import (
    DeviceOption,
    ForceOption,
    JsonOption,
    ProfileOption,
    StrictOption,
    VerboseOption,
    stage_context,
)
from bringup.cli.output import console, plain, print_json, progress
from bringup.log import configure_logging
from bringup.probes.collectives.sizes import DEFAULT_SIZES, format_bytes
from bringup.terminal_text import markup_safe as safe

if TYPE_CHECKING:  # these import torch: loaded when the command runs, not for --help
    from rich.table import Table

    from bringup.profiles.sections.collectives import CollectivesSection

# bringup.probes.collectives.patterns.DEFAULT_DTYPES, spelled out so that --help need not import torch (a test checks)
DEFAULT_DTYPES = ("float32", "bfloat16", "float16", "int32")

STATUS_STYLE = {"pass": "green", "fail": "red", "error": "red", "crashed": "red", "timeout": "red",
                "skipped": "yellow", "unsupported": "yellow"}


def _fmt(value: Optional[float], digits: int = 2) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value >= 1000 else f"{value:.{digits}f}"


def results_table(section: CollectivesSection) -> Table:
    from rich import box
    from rich.table import Table

    from bringup.profiles.sections.collectives import BANDWIDTH_LABELS

    bandwidth = BANDWIDTH_LABELS.get(section.data_path or "", "bandwidth in GB/s")
    table = Table(title=f"Collectives: {section.backend}, {section.world_size} ranks "
                        f"({section.launch}, {section.nnodes} node(s)), buffers on {section.device_type}; "
                        f"time = median µs, {bandwidth}",
                  title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in ("op", "dtype", "size", "status", "#wrong", "time", "algbw", "busbw"):
        left = col in ("op", "dtype", "status")
        table.add_column(col, justify="left" if left else "right", no_wrap=True)
    for case in section.cases:
        style = STATUS_STYLE.get(case.status, "")
        status = f"[{style}]{case.status}[/]"
        table.add_row(plain(case.op), plain(case.dtype), format_bytes(case.size_bytes), status,
                      "-" if case.wrong is None else str(case.wrong), _fmt(case.time_us, 1),
                      _fmt(case.algbw_gbps, 3), _fmt(case.busbw_gbps, 3))
    return table


def print_report(section: CollectivesSection, profile_path: str) -> None:
    console.print(results_table(section))
    for case in section.cases:
        if case.error:
            console.print(f"[yellow]{safe(case.op)} {safe(case.dtype)} {format_bytes(case.size_bytes)}[/]: "
                          f"{safe(case.error)}",
                          highlight=False)
    for fault in section.faults:
        label = "FAULT" if fault.culprit else "also"
        console.print(f"[red]{label}[/] rank {fault.rank if fault.rank is not None else '?'} "
                      f"({safe(fault.kind)}): {safe(fault.detail)}", highlight=False)
    if section.faults and section.detected_after_s is not None:
        console.print(f"first fault detected {section.detected_after_s:.2f} s after the last progress "
                      f"(timeout {section.timeout_s:g} s); every rank process was ended", highlight=False)
    failing = sum(c.status not in ("pass", "skipped", "unsupported") for c in section.cases)
    fallbacks = "".join(f", fallback: {safe(f.instead)}" for f in section.fallbacks)
    console.print(f"{section.status.upper()}: {len(section.cases)} of {section.cases_planned} cases run, "
                  f"{failing} failing, {len(section.faults)} fault(s){fallbacks}, {section.seconds:.1f} s "
                  f"— written to {safe(profile_path)}", highlight=False)


def command(
    nproc: Annotated[Optional[int], typer.Option("--nproc", "-n", help="Local processes to start, one per "
                     "device of the selected family (CPU: default 2). Not used under torchrun.",
                     callback=at_least_one)] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto (from the device family), or a "
                       "torch.distributed backend: nccl, gloo, xccl, hccl, ...")] = "auto",
    sizes: Annotated[str, typer.Option("--sizes", help="Message sizes in bytes (K/M/G = 1024 multiples), "
                     "comma separated; at least one element each.")] = DEFAULT_SIZES,
    dtype: Annotated[Optional[list[str]], typer.Option("--dtype", help="dtype(s) to test, repeatable or "
                     f"comma separated (default: {','.join(DEFAULT_DTYPES)}).")] = None,
    op: Annotated[Optional[list[str]], typer.Option("--op", help="Only these operations (repeatable): "
                  "all_reduce_sum, all_reduce_max, all_gather, reduce_scatter, broadcast, all_to_all, "
                  "send_recv_ring, barrier.")] = None,
    iters: Annotated[int, typer.Option("--iters", help="Timed repetitions per case (fewer above 2 MiB).",
                                       callback=at_least_one)] = 10,
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed (but checked) repetitions first.",
                                        callback=at_least_zero)] = 2,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds without progress after which a rank "
                       "is declared hung; the run is then ended and the rank named.",
                       callback=positive_seconds)] = 60.0,
    startup_timeout: Annotated[float, typer.Option("--startup-timeout", help="Seconds the ranks may take "
                               "to start and join the process group.", callback=positive_seconds)] = 120.0,
    start_method: Annotated[str, typer.Option("--start-method", help="auto, fork (one torch import, "
                            "then fork each rank; Linux default) or spawn (a fresh interpreter per rank).")]
    = "auto",
    inject_fault: Annotated[Optional[str], typer.Option("--inject-fault", hidden=True, help="Test/diagnostic: "
                            "rank=R:corrupt|exit|hang[:op=OP][:elements=K][:code=C].")] = None,
    device: DeviceOption = None,
    profile: ProfileOption = None,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
    strict: StrictOption = False,
    force: ForceOption = False,
) -> None:
    """Verify torch.distributed collectives: exact results and bandwidth, with faults detected and named.

    Checks all_reduce (sum, max), all_gather, reduce_scatter, broadcast, all_to_all, a send/recv ring, barrier.

    Data is rank-dependent and integer-valued, so every result is known exactly; each wrong element counts.

    Times are medians after warm-up; algbw = size / time; busbw = algbw x the nccl-tests bus factor.

    A rank that dies or hangs is named, every process is ended, and the exit code is 1.

    Examples: bringup verify-collectives --nproc 4

    bringup verify-collectives --sizes 1,1M --dtype float32 --json

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:29500 -m bringup verify-collectives
    """
    from bringup.backends.registry import backend_for
    from bringup.fallbacks import FallbackRecorder
    from bringup.probes.collectives.stage import CollectivesOptions, planned_cases, reports_here, run_collectives
    from bringup.profiles.schema import Profile
    from bringup.profiles.store import now_iso, update_profile

    ctx = stage_context(device, profile, json_out, verbose, strict=strict, force=force)
    options = CollectivesOptions(
        nproc=nproc, backend=backend, sizes=sizes, dtypes=dtype or list(DEFAULT_DTYPES), ops=op or [],
        warmup=warmup, iters=iters, timeout_s=timeout, startup_timeout_s=startup_timeout,
        start_method=start_method, inject_fault=inject_fault,
    )
    family_backend = backend_for(ctx.device)
    started = now_iso()
    fallbacks = FallbackRecorder(strict=strict)
    with progress(json_out or not reports_here()) as bar:
        task = bar.add_task("collectives", total=planned_cases(options))
        run = run_collectives(options, ctx.info.backend, ctx.device.type, family_backend.device_count(),
                              fallbacks, on_case_done=lambda n: bar.update(task, advance=n))
    if not run.reporting:
        configure_logging(verbose, quiet=True)
        raise typer.Exit(0 if run.section.status == "pass" else 1)

    def record(p: Profile) -> None:
        p.collectives = run.section

    update_profile(ctx.profile_path, ctx.info, record, stage="collectives", status="complete", force=force,
                   started=started)
    if json_out:
        print_json("verify-collectives", {"device": ctx.info.id, "profile": str(ctx.profile_path),
                    "collectives": run.section.model_dump(mode="json")})
    else:
        print_report(run.section, str(ctx.profile_path))
    if run.section.status != "pass":
        raise typer.Exit(1)
