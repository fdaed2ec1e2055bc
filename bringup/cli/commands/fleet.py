"""`bringup fleet`: the stages on every rank's own device through torch.distributed, and the outliers named.

Parse, start the ranks (or join torchrun's world), judge, render. The logic is in bringup.probes.fleet;
this module also holds the per-rank entry point, because a rank runs the ordinary stage commands in-process.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bringup.backends.host import is_host
from bringup.cli.checks import at_least_one, non_negative_number, positive_seconds
from bringup.cli.common import DeviceOption, JsonOption, StrictOption, VerboseOption
from bringup.cli.output import console, plain, print_json, progress
from bringup.errors import BringupError

if TYPE_CHECKING:
    from bringup.probes.collectives.execute import RankSetup
    from bringup.probes.collectives.ranks.channel import Channel
    from bringup.probes.fleet.options import FleetOptions
    from bringup.probes.fleet.result import FleetResult

# bringup.probes.fleet.options, spelled out so that --help imports nothing heavy
STAGE_LIST = "devices, probe, verify-ops, bench, selftest, links"
KIND_STYLE = {"fault": "bold red", "bench": "red", "link": "red", "ops": "red", "selftest": "red",
              "capability": "yellow", "environment": "yellow"}


def run_bringup(args: list[str]) -> int:
    """`bringup ARGS...` in this process (how a rank runs a stage); returns the exit code."""
    from bringup.cli.app import app, print_error

    group = typer.main.get_command(app)
    try:
        result = group.main(args, standalone_mode=False, prog_name="bringup")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except BringupError as exc:
        print_error(str(exc))
        return exc.exit_code
    except Exception as exc:  # typer/click Exit (their class differs between typer versions)
        if type(exc).__name__ != "Exit":
            raise
        return int(getattr(exc, "exit_code", 1))
    return int(result or 0)


def rank_entry(setup: RankSetup, channel: Channel) -> None:
    """What each local rank runs (named by bringup.probes.fleet.launch.RANK_ENTRY)."""
    from bringup.probes.fleet.options import FleetOptions
    from bringup.probes.fleet.rank import run_rank

    run_rank(setup, channel, FleetOptions.from_env(), run_bringup)


def _fmt(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def ranks_table(result: FleetResult) -> Any:
    from rich import box
    from rich.table import Table

    flagged = {o.rank for o in result.outliers}
    figures = sorted({name for r in result.ranks for name in r.figures})
    table = Table(title=f"Fleet: {result.world_size} ranks ({result.launch}, {result.nnodes} node(s)), "
                        f"{result.seconds:.1f} s", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    link_column = f"link {result.link_unit}"
    for column in ("rank", "host", "device", "stages", "ops", "selftest", *figures, link_column):
        table.add_column(column, justify="right" if column in figures or column == link_column else "left")
    for summary in result.ranks:
        bad = [f"{n} {'unfinished' if s.exit_code == -1 else f'exit {s.exit_code}'}"
               for n, s in summary.stages.items() if s.exit_code != 0]
        stages = ", ".join(bad) if bad else f"{len(summary.stages)} ok"
        failing = sum(v not in ("pass", "unsupported") for v in summary.ops.values())
        ops = f"{len(summary.ops) - failing} pass, {failing} not" if summary.ops else "-"
        links = ", ".join(f"{k}: {v:.2f}" for k, v in summary.links.items()) or "-"
        style = "red" if summary.rank in flagged else ""
        table.add_row(str(summary.rank), *(plain(cell) for cell in (summary.host, summary.device, stages or "-")),
                      ops, plain(summary.selftest or "-"), *(_fmt(summary.figures.get(name)) for name in figures),
                      plain(links), style=style)
    return table


def print_result(result: FleetResult, fleet_file: Path) -> None:
    from bringup.terminal_text import markup_safe as escape

    console.print(ranks_table(result))
    links = result.collectives
    if links.get("backend"):
        console.print(plain(f"links backend: {links['backend']} ({links.get('reason', '')})"), highlight=False)
    for name, threshold in result.thresholds.items():
        console.print(plain(f"threshold {name}: median {threshold.median:.4g}, MAD {threshold.mad:.3g}; outlier when "
                            f"{threshold.rule}"), highlight=False)
    for fault in result.faults:
        label = "FAULT" if fault.culprit else "also"
        console.print(f"[red]{label}[/] rank {fault.rank if fault.rank is not None else '?'} ({escape(fault.kind)}"
                      f"{', stage ' + escape(fault.stage) if fault.stage else ''}): {escape(fault.detail)}",
                      highlight=False)
    for outlier in result.outliers:
        style = KIND_STYLE.get(outlier.kind, "red")
        console.print(f"[{style}]OUTLIER[/] rank {outlier.rank} on {escape(outlier.host)} ({escape(outlier.kind)}): "
                      f"{escape(outlier.detail)}",
                      highlight=False)
    verdict = f"{len(result.outliers)} outlier(s)" if result.outliers else "no outlier"
    console.print(f"{'FAIL' if result.outliers else 'PASS'}: {verdict} among {len(result.ranks)} rank(s) — "
                  f"{escape(str(fleet_file))} and one profile per rank "
                  f"(bringup report -p {escape(str(fleet_file.parent))})",
                  highlight=False)


def _validated_faults(inject_fault: Optional[str]) -> Optional[str]:
    import os

    from bringup.probes.fleet.faults import ENV_VAR, parse_faults

    text = inject_fault if inject_fault is not None else os.environ.get(ENV_VAR)
    try:
        parse_faults(text or "")
    except ValueError as exc:
        raise BringupError(f"--inject-fault / {ENV_VAR}: {exc}") from None
    return text


def command(
    nproc: Annotated[Optional[int], typer.Option("--nproc", "-n", help="Local ranks to start, one per device of "
                     "the selected family (CPU: default 2). Not used under torchrun.", callback=at_least_one)] = None,
    stages: Annotated[Optional[list[str]], typer.Option("--stages", help=f"Stages to run (repeat or comma-separate; "
                      f"default all): {STAGE_LIST}.")] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder for one profile per host, device and rank, and "
                   "fleet.json.")] = Path("fleet"),
    backend: Annotated[str, typer.Option("--backend", help="torch.distributed backend for the links: auto (from "
                       "the device family), nccl, gloo, xccl, hccl, ...")] = "auto",
    mad_k: Annotated[float, typer.Option("--mad-k", help="A figure is an outlier beyond this many robust standard "
                     "deviations (1.4826 x MAD) from the fleet median.", callback=non_negative_number)] = 3.5,
    min_deviation: Annotated[float, typer.Option("--min-deviation", help="...and beyond at least this share of "
                             "the median (0.1 = 10 %).", callback=non_negative_number)] = 0.10,
    link_min_deviation: Annotated[float, typer.Option("--link-min-deviation", help="The same floor for link "
                                  "bandwidth, which other traffic moves more than a device's figures (0.4 = a "
                                  "link 40 % below the fleet's).", callback=non_negative_number)] = 0.40,
    link_size: Annotated[str, typer.Option("--link-size", help="Bytes each link's ping-pong moves each way (K/M/G = "
                         "1024 multiples).")] = "4M",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds without progress after which a rank is "
                       "declared hung.", callback=positive_seconds)] = 600.0,
    startup_timeout: Annotated[float, typer.Option("--startup-timeout", help="Seconds the ranks may take to start "
                               "and join the process group.", callback=positive_seconds)] = 120.0,
    start_method: Annotated[str, typer.Option("--start-method", help="auto, fork or spawn (see verify-collectives).")
                            ] = "auto",
    inject_fault: Annotated[Optional[str], typer.Option("--inject-fault", hidden=True, help="Test/diagnostic: "
                            "RANK=kill@STAGE|hang@STAGE|MODULE, comma separated.")] = None,
    device: DeviceOption = None,
    json_out: JsonOption = False,
    verbose: VerboseOption = False,
    strict: StrictOption = False,
) -> None:
    """Run the stages on every rank's own device through torch.distributed and name the ranks unlike the others.

    Each rank writes its own profile into --out; rank 0 gathers the ranks' summaries (gather_object).
    Outliers: bench figures below the fleet median by more than a MAD threshold (printed), op or selftest
    verdicts that differ from the majority, capabilities present on some ranks only, differing
    driver/torch/environment facts, slow links, and ranks that died or hung (named with the stage).
    Exit 1 when there is an outlier.

    Examples: bringup fleet --nproc 4 --device cpu

    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 -m bringup fleet --out fleet

    Slurm, one torchrun per node: srun --ntasks-per-node 1 torchrun --nnodes $SLURM_NNODES --nproc-per-node 8
    --rdzv-backend c10d --rdzv-id $SLURM_JOB_ID --rdzv-endpoint $HEAD:29500 -m bringup fleet --out /shared/fleet
    """
    import sys

    from bringup.backends.registry import backend_for
    from bringup.backends.selection.select import select_device
    from bringup.fallbacks import FallbackRecorder
    from bringup.log import configure_logging
    from bringup.probes.collectives.backend_choice import choose_backend
    from bringup.probes.collectives.ranks.torchrun_mode import in_external_world
    from bringup.probes.fleet.launch import run_in_world, run_local
    from bringup.probes.fleet.options import FleetOptions, parse_stages

    external = in_external_world()
    configure_logging(verbose, quiet=external and not _is_rank_zero())
    try:
        chosen_stages = parse_stages(stages or [])
    except ValueError as exc:
        raise BringupError(f"--stages: {exc}") from None
    if start_method not in ("auto", "fork", "spawn"):
        raise BringupError(f"--start-method {start_method}: choose auto, fork or spawn")
    fault_text = _validated_faults(inject_fault)
    link_bytes = _link_bytes(link_size)
    selection = select_device(device)
    device_type, family = selection.device.type, selection.info.backend
    recorder = FallbackRecorder(strict=strict)
    choice = choose_backend(backend, family, device_type, recorder)
    options = FleetOptions(out_dir=str(out.resolve()), stages=chosen_stages, mad_k=mad_k, min_deviation=min_deviation,
                           link_min_deviation=link_min_deviation, device_type=device_type, timeout_s=timeout,
                           link_bytes=link_bytes)
    if external:
        if nproc is not None:
            raise BringupError("--nproc starts local ranks, but this process is already one rank of a torchrun/env:// "
                               "world; drop --nproc under torchrun")
        result = run_in_world(options, choice, run_bringup, recorder.events)
        if result is None:
            raise typer.Exit(0)
    else:
        world = _world_size(nproc, device_type, backend_for(selection.device).device_count())
        method = start_method if start_method != "auto" else ("fork" if sys.platform.startswith("linux") else "spawn")
        with progress(json_out) as bar:
            task = bar.add_task("fleet", total=len(chosen_stages) + 1)
            result = run_local(options, choice, world, method, startup_timeout, fault_text,
                               on_step_done=lambda n: bar.update(task, advance=n), fallbacks=recorder.events)
    finish(result, out, options, json_out)


def finish(result: FleetResult, out: Path, options: FleetOptions, json_out: bool) -> None:
    from bringup.probes.fleet.result import judge, write_result

    judge(result, options.mad_k, options.min_deviation, options.link_min_deviation)
    fleet_file = write_result(result, out)
    if json_out:
        print_json("fleet", {"fleet": str(fleet_file), **result.to_dict()})
    else:
        print_result(result, fleet_file)
    if result.failed:
        raise typer.Exit(1)


def _link_bytes(text: str) -> int:
    from bringup.probes.collectives.sizes import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise BringupError(f"--link-size: {exc}") from None


def _is_rank_zero() -> bool:
    import os

    return os.environ.get("RANK", "0") == "0"


def _world_size(nproc: Optional[int], device_type: str, device_count: int) -> int:
    if is_host(device_type):
        return nproc or 2
    if device_count < 1:
        raise BringupError(f"no {device_type} device is usable; check `bringup devices`")
    if nproc is not None and nproc > device_count:
        raise BringupError(f"--nproc {nproc} needs {nproc} {device_type} devices, but {device_count} are usable; use "
                           f"--nproc {device_count} or fewer (one rank per device)")
    return nproc or device_count
