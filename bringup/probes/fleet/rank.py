"""One rank of a fleet -- the same code under the local launcher and under torchrun: inject this rank's
test faults, run the stages into the rank's own profile, then gather every rank's summary on rank 0.

Reports go through the collectives engine's Channel: `arrive` before each stage (so the launcher can say
which stage a rank that died or hung was in), `result` after it, and rank 0's last `result` carries the
gathered summaries.
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bringup.backends.host import HOST_DEVICE_TYPE, is_host
from bringup.errors import BringupError
from bringup.probes.collectives.execute import RankSetup, monitored_barrier
from bringup.probes.collectives.ranks.channel import Channel
from bringup.probes.fleet.faults import act_on_stage, faults_for, load_plugins
from bringup.probes.fleet.gather import gather_summaries
from bringup.probes.fleet.naming import rank_profile_path
from bringup.probes.fleet.options import FleetOptions
from bringup.probes.fleet.stages import CommandRunner, RankContext, run_stage
from bringup.probes.fleet.summary import RankSummary, summarise

GATHER_LABEL = "gather"
RUN_VARIABLE_PREFIXES = ("BRINGUP_COLLECTIVES_", "BRINGUP_FLEET_")


def rank_device(device_type: str, local_rank: int) -> str:
    """CPU ranks share the CPU; accelerator ranks get one device each, by local rank."""
    return HOST_DEVICE_TYPE if is_host(device_type) else f"{device_type}:{local_rank}"


def read_summary(path: Path, rank: int, host: str, device: str) -> RankSummary:
    """The rank's summary from its profile file (an unreadable or missing file gives an empty one)."""
    from bringup.profiles.store import load_profile_or_none

    try:
        profile = load_profile_or_none(path)
    except BringupError:
        profile = None
    return summarise(profile, rank, host, device, path.name)


def scrub_run_environment() -> None:
    """Drop the launch's own variables (pipe numbers, the store's port...) once read, so the environment a
    rank's profile records is the machine's -- and two ranks' profiles differ only where the machines do."""
    for name in [n for n in os.environ if n.startswith(RUN_VARIABLE_PREFIXES)]:
        del os.environ[name]


def run_rank(setup: RankSetup, channel: Channel, options: FleetOptions,
             run_command: CommandRunner) -> list[dict[str, Any]] | None:
    """This rank's stages, then the gather; rank 0 returns every rank's summary, the others None."""
    host = socket.gethostname()
    local_rank = int(os.environ.get("LOCAL_RANK", setup.rank))
    local_world_size = int(os.environ.get("LOCAL_WORLD_SIZE", setup.world_size))
    device = rank_device(options.device_type, local_rank)
    path = rank_profile_path(Path(options.out_dir), host, device, setup.rank)
    faults = faults_for(setup.rank)
    load_plugins(faults)
    scrub_run_environment()
    ctx = RankContext(setup, options, device, path, run_command, local_rank, max(local_world_size, local_rank + 1))
    results = {}
    for index, stage in enumerate(options.stages):
        channel.send("arrive", index=index, label=f"stage {stage}")
        act_on_stage(faults, stage)
        results[stage] = run_stage(stage, ctx)
        channel.send("result", index=index, label=f"stage {stage}", stage=stage, **asdict(results[stage]))
    summary = read_summary(path, setup.rank, host, device)
    summary.stages, summary.links = results, ctx.links
    index = len(options.stages)
    channel.send("arrive", index=index, label=GATHER_LABEL)
    monitored_barrier(setup, 0.75 * options.timeout_s)
    gathered = gather_summaries(setup, summary.to_dict())
    channel.send("result", index=index, label=GATHER_LABEL, summaries=gathered, summary=summary.to_dict())
    return gathered
