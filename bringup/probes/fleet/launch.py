"""Start the fleet: N local ranks through the collectives launcher (its process management, fault naming
and clean-up), or this process's share of an external torchrun world (env:// rendezvous, any node count).

Local: every rank runs rank.run_rank (worker.ENTRY_ENV_VAR points the collectives worker at it); rank 0's
last report holds the summaries it gathered. When a rank died or hung there is no gather: each rank's
summary is then read from its profile file, and the launcher's faults name who failed in which stage.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.fallbacks import FallbackEvent
from bringup.probes.collectives.backend_choice import BackendChoice
from bringup.probes.collectives.execute import MonitorFailure, RankSetup, first_line
from bringup.probes.collectives.plan import Plan
from bringup.probes.collectives.ranks.channel import Channel
from bringup.probes.collectives.ranks.launcher import LaunchOutcome, launch
from bringup.probes.collectives.ranks.runtime import (
    device_for_rank,
    make_synchronize,
    monitor_group,
    prepare_backend,
)
from bringup.probes.collectives.ranks.torchrun_mode import world_info
from bringup.probes.collectives.ranks.worker import ENTRY_ENV_VAR
from bringup.probes.collectives.report import consolidate_faults
from bringup.probes.fleet.faults import ENV_VAR as FAULTS_ENV_VAR
from bringup.probes.fleet.naming import rank_profile_path
from bringup.probes.fleet.options import OPTIONS_ENV_VAR, FleetOptions
from bringup.probes.fleet.rank import rank_device, read_summary, run_rank
from bringup.probes.fleet.result import FleetFault, FleetResult
from bringup.probes.fleet.stages import CommandRunner
from bringup.probes.fleet.summary import RankSummary, StageResult

RANK_ENTRY = "bringup.cli.commands.fleet:rank_entry"


def backend_facts(choice: BackendChoice, fallbacks: list[FallbackEvent]) -> dict[str, Any]:
    """What fleet.json records of the links' backend, its fallbacks included (each was logged at WARNING)."""
    return {"backend": choice.name, "reason": choice.reason, "device_type": choice.device_type,
            "data_path": choice.data_path, "fallbacks": [asdict(event) for event in fallbacks]}


def _plan(options: FleetOptions, choice: BackendChoice) -> Plan:
    return Plan(backend=choice.name, device_type=choice.device_type, ops=[], timeout_s=options.timeout_s)


def _stage_of(options: FleetOptions, index: int) -> str | None:
    if index < 0:
        return None
    return options.stages[index] if index < len(options.stages) else "gather"


def run_local(options: FleetOptions, choice: BackendChoice, nproc: int, start_method: str,
              startup_timeout_s: float, fault_text: str | None,
              on_step_done: Callable[[int], None] | None = None,
              fallbacks: list[FallbackEvent] | None = None) -> FleetResult:
    env = {ENTRY_ENV_VAR: RANK_ENTRY, OPTIONS_ENV_VAR: options.to_json()}
    if fault_text is not None:
        env[FAULTS_ENV_VAR] = fault_text
    outcome = launch(_plan(options, choice), nproc, start_method=start_method, startup_timeout_s=startup_timeout_s,
                     on_case_done=on_step_done, extra_env=env)
    host = socket.gethostname()
    ranks = _gathered(outcome, len(options.stages)) or _from_files(outcome, options, host)
    faults = [FleetFault(f.rank, host, f.kind, f.detail, _stage_of(options, outcome.arrived.get(f.rank, -1))
                         if f.rank is not None else None, f.culprit)
              for f in consolidate_faults(outcome.faults)]
    return FleetResult(nproc, start_method, 1, outcome.seconds, list(options.stages), ranks, faults,
                       options=_recorded(options), pids=dict(outcome.pids),
                       collectives=backend_facts(choice, fallbacks or []))


def _gathered(outcome: LaunchOutcome, gather_index: int) -> list[RankSummary] | None:
    if outcome.faults:
        return None
    message = outcome.results.get(0, {}).get(gather_index) or {}
    summaries = message.get("summaries")
    if not summaries or len(summaries) != outcome.world_size:
        return None
    return [RankSummary.from_dict(s) for s in summaries]


def _from_files(outcome: LaunchOutcome, options: FleetOptions, host: str) -> list[RankSummary]:
    """Each rank's summary from its own profile and its own reports (after a fault there is no gather)."""
    ranks = []
    for rank in range(outcome.world_size):
        device = rank_device(options.device_type, rank)
        summary = read_summary(rank_profile_path(Path(options.out_dir), host, device, rank), rank, host, device)
        for message in outcome.results.get(rank, {}).values():
            if message.get("stage"):
                summary.stages[message["stage"]] = StageResult(int(message["exit_code"]), float(message["seconds"]),
                                                               message.get("error"))
            if message.get("summary"):
                summary.links = dict(message["summary"].get("links") or {})
        unfinished = _stage_of(options, outcome.arrived.get(rank, -1))
        if unfinished in options.stages and unfinished not in summary.stages:
            summary.stages[unfinished] = StageResult(-1, 0.0, "did not finish: the run ended at a fault")
        ranks.append(summary)
    return ranks


def _recorded(options: FleetOptions) -> dict:
    return {"mad_k": options.mad_k, "min_deviation": options.min_deviation,
            "link_min_deviation": options.link_min_deviation, "ops": options.ops,
            "selftest_steps": options.selftest_steps, "link_bytes": options.link_bytes,
            "device_type": options.device_type}


def run_in_world(options: FleetOptions, choice: BackendChoice, run_command: CommandRunner,
                 fallbacks: list[FallbackEvent] | None = None) -> FleetResult | None:
    """This process as one rank of a torchrun world; rank 0 returns the fleet's result, the others None."""
    import torch.distributed as dist

    info = world_info()
    started = time.monotonic()
    prepare_backend(choice.name, choice.device_type)
    try:
        dist.init_process_group(choice.name, init_method="env://", timeout=timedelta(seconds=options.timeout_s))
    except (RuntimeError, ValueError, OSError) as exc:
        raise BringupError(f"rank {info.rank}: joining the env:// world at {os.environ.get('MASTER_ADDR')}:"
                           f"{os.environ.get('MASTER_PORT')} failed ({first_line(exc)}); check that every rank "
                           "runs and the address is reachable") from None
    device = device_for_rank(choice.device_type, info.local_rank)
    setup = RankSetup(info.rank, info.world_size, device, make_synchronize(device), monitor_group(choice.name))
    host = socket.gethostname()
    faults: list[FleetFault] = []
    gathered = None
    try:
        gathered = run_rank(setup, Channel(info.rank), options, run_command)
    except MonitorFailure as exc:
        faults = [FleetFault(s, "?", "hung", f"rank {s} did not arrive in time: named by gloo's monitored "
                             f"barrier on rank {info.rank} ({exc.detail})", None) for s in exc.suspects]
        if not faults:
            faults = [FleetFault(info.rank, host, "error", exc.detail, None)]
    finally:
        if not faults:
            dist.destroy_process_group()
    if info.rank != 0:
        return None
    if gathered is not None:
        ranks = [RankSummary.from_dict(s) for s in gathered]
    else:
        device_name = rank_device(options.device_type, info.local_rank)
        ranks = [read_summary(rank_profile_path(Path(options.out_dir), host, device_name, 0), 0, host, device_name)]
    return FleetResult(info.world_size, "torchrun", info.nnodes, time.monotonic() - started, list(options.stages),
                       ranks, faults, options=_recorded(options), collectives=backend_facts(choice, fallbacks or []))
