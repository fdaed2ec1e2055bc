"""Running inside a world someone else launched: `torchrun` (or any env:// launcher) on one or more nodes.

Every process runs the same command; the rendezvous comes from RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT. Each rank runs the plan; the monitored barrier before each case names a rank that is
missing, and torchrun's agent ends the others when one fails. After a clean run the ranks exchange
their reports (all_gather_object over gloo) so every rank computes the same verdict and exit code;
after a failure each rank reports what it saw itself. Rank 0 prints and writes the profile.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch.distributed as dist

from bringup.errors import BringupError
from bringup.probes.collectives.execute import (
    MonitorFailure,
    RankSetup,
    barrier_timeout,
    first_line,
    monitored_barrier,
    run_plan,
)
from bringup.probes.collectives.faults import FaultSpec
from bringup.probes.collectives.plan import Plan
from bringup.probes.collectives.ranks.channel import Channel
from bringup.probes.collectives.ranks.launcher import Fault, LaunchOutcome, RankState, handle_message
from bringup.probes.collectives.ranks.runtime import (
    device_for_rank,
    make_synchronize,
    monitor_group,
    prepare_backend,
)

_ENV_WORLD = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def in_external_world() -> bool:
    """True under torchrun (or another launcher that sets the env:// rendezvous variables)."""
    return all(name in os.environ for name in _ENV_WORLD)


@dataclass
class WorldInfo:
    rank: int
    world_size: int
    local_rank: int
    nnodes: int


def reports_here() -> bool:
    """Whether this process prints and writes the profile: always, except on ranks > 0 of a torchrun world."""
    return not in_external_world() or int(os.environ["RANK"]) == 0


def world_info() -> WorldInfo:
    world_size = int(os.environ["WORLD_SIZE"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    return WorldInfo(int(os.environ["RANK"]), world_size, int(os.environ.get("LOCAL_RANK", 0)),
                     max(1, world_size // max(1, local_world)))


class _CountingChannel(Channel):
    def __init__(self, rank: int, on_case_done: Callable[[int], None] | None) -> None:
        super().__init__(rank)
        self._on_case_done = on_case_done

    def _emit(self, message: dict) -> None:
        super()._emit(message)
        if message["type"] == "result" and self._on_case_done is not None:
            self._on_case_done(1)


def run_in_world(plan: Plan, fault: FaultSpec | None,
                 on_case_done: Callable[[int], None] | None = None) -> LaunchOutcome:
    """Run the plan as this rank of the external world and return the (shared or local) outcome."""
    info = world_info()
    started = time.monotonic()
    channel = _CountingChannel(info.rank, on_case_done)
    device = device_for_rank(plan.device_type, info.local_rank)
    prepare_backend(plan.backend, plan.device_type)
    try:
        dist.init_process_group(plan.backend, init_method="env://", timeout=timedelta(seconds=plan.timeout_s))
    except (RuntimeError, ValueError, OSError) as exc:
        raise BringupError(
            f"rank {info.rank}: joining the env:// world at {os.environ['MASTER_ADDR']}:"
            f"{os.environ['MASTER_PORT']} failed ({first_line(exc)}); check that every rank runs and "
            "the address is reachable") from None
    ok = False
    try:
        channel.send("ready", backend=dist.get_backend(), device=str(device), pid=os.getpid())
        setup = RankSetup(info.rank, info.world_size, device, make_synchronize(device), monitor_group(plan.backend))
        try:
            run_plan(plan, setup, channel, fault)
            monitored_barrier(setup, barrier_timeout(plan))
            channel.send("done")
            ok = True
        except MonitorFailure as exc:
            channel.send("fault", suspects=exc.suspects, detail=exc.detail)
        except Exception as exc:
            channel.send("error", detail=first_line(exc))
        per_rank = {info.rank: channel.messages}
        if ok:
            gathered: list[object] = [None] * info.world_size
            dist.all_gather_object(gathered, channel.messages, group=setup.monitor_group)
            per_rank = {r: msgs for r, msgs in enumerate(gathered) if isinstance(msgs, list)}
    finally:
        if ok:
            dist.destroy_process_group()
    return _outcome(info.world_size, per_rank, time.monotonic() - started)


def _outcome(world_size: int, per_rank: dict[int, list[dict]], seconds: float) -> LaunchOutcome:
    faults: list[Fault] = []
    states = {}
    for rank, messages in per_rank.items():
        state = RankState(rank, None, None)  # type: ignore[arg-type]
        for message in messages:
            handle_message(state, message, faults)
        states[rank] = state
    return LaunchOutcome(world_size, {r: s.results for r, s in states.items()},
                         {r: s.ready for r, s in states.items() if s.ready}, faults, seconds,
                         {r: int(s.ready.get("pid", 0)) for r, s in states.items() if s.ready},
                         {r: s.arrived for r, s in states.items()})
