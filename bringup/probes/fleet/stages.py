"""One rank's stages, each into the rank's own profile.

devices, probe, verify-ops and selftest are the ordinary stage commands run in this process (through a
command runner the CLI hands in, so this package does not import the CLI) with quick arguments and no
worker subprocess: the rank is already a process of its own, and a rank that crashes is named by the
launcher. bench and links are collective -- every rank takes part in every turn, whatever its earlier
stages did, so the ranks never fall out of step.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch.distributed as dist

from bringup.log import get_logger
from bringup.probes.collectives.execute import RankSetup, first_line, monitored_barrier
from bringup.probes.fleet.options import QUICK_PROBE_GROUPS, FleetOptions
from bringup.probes.fleet.summary import StageResult

log = get_logger("fleet")
BENCH_ROUNDS = 2
# every link is measured in each of these rounds and keeps its best: a burst of load on the host during one
# link's turn is not the link (on a 2-core host running 4 ranks, single rounds put clean links 0.3-1x apart)
LINK_ROUNDS = 3
CommandRunner = Callable[[list[str]], int]   # runs `bringup ARGS...` in this process, returns its exit code


@dataclass
class RankContext:
    setup: RankSetup
    options: FleetOptions
    device: str                 # this rank's device, e.g. cpu or cuda:3
    profile_path: Path
    run_command: CommandRunner
    local_rank: int = 0
    local_world_size: int = 1
    links: dict[str, float] = field(default_factory=dict)


def command_args(stage: str, ctx: RankContext) -> list[str]:
    """The quick stage command for this rank."""
    common = ["--device", ctx.device, "--profile", str(ctx.profile_path)]
    if stage == "devices":
        return ["devices", *common]
    if stage == "probe":
        return ["probe", *common, "--no-isolate", *(a for g in QUICK_PROBE_GROUPS for a in ("--only", g))]
    if stage == "verify-ops":
        return ["verify-ops", *common, "--no-isolate", "--dtype", "float32",
                *(a for op in ctx.options.ops for a in ("--op", op))]
    if stage == "selftest":
        return ["selftest", *common, "--steps", str(ctx.options.selftest_steps)]
    raise ValueError(f"no command for stage {stage}")


def log_path(ctx: RankContext) -> Path:
    """The rank's stage output, beside its profile: `<profile stem>.log`."""
    return ctx.profile_path.with_suffix(".log")


def run_command_stage(stage: str, ctx: RankContext) -> StageResult:
    """The stage command, its terminal output appended to the rank's log (under torchrun every rank shares
    one terminal; the fleet's own summary is what belongs there)."""
    start = time.perf_counter()
    try:
        ctx.profile_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path(ctx), "a", encoding="utf-8") as out, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out):
            print(f"== bringup {' '.join(command_args(stage, ctx))}", flush=True)
            code = ctx.run_command(command_args(stage, ctx))
        return StageResult(code, round(time.perf_counter() - start, 3))
    except Exception as exc:  # the stage broke on this rank: recorded, the rank goes on with the others
        log.warning("stage %s failed on rank %d: %s", stage, ctx.setup.rank, first_line(exc))
        return StageResult(-1, round(time.perf_counter() - start, 3), first_line(exc))


def take_turns(ctx: RankContext, work: Callable[[int], None], turns: int) -> None:
    """All ranks meet (gloo's monitored barrier names a missing one), then turn by turn: work(turn), barrier."""
    monitored_barrier(ctx.setup, 0.75 * ctx.options.timeout_s)
    for turn in range(turns):
        work(turn)
        dist.barrier(group=ctx.setup.monitor_group)  # the process group's timeout applies


def agreed_turns(ctx: RankContext) -> int:
    """The most ranks any host has (every rank must pass the same number of barriers)."""
    import torch

    most = torch.tensor([ctx.local_world_size], dtype=torch.int64)
    dist.all_reduce(most, op=dist.ReduceOp.MAX, group=ctx.setup.monitor_group)
    return int(most.item())


def run_bench(ctx: RankContext) -> StageResult:
    """BENCH_ROUNDS rounds of turns; each group keeps its best round (a burst of load from outside the fleet
    during one turn is not the device), and the profile records that round's measurements. A failure on this
    rank (even an import) is recorded and the rank still takes part in every turn."""
    start = time.perf_counter()
    best: dict = {}
    outcome: dict[str, str | None] = {"error": None, "started": None}
    turns = agreed_turns(ctx)

    def my_turn(turn: int) -> None:
        if turn % turns != ctx.local_rank or outcome["error"]:
            return
        try:
            import torch

            from bringup.backends.selection.select import select_device
            from bringup.probes.fleet import quick_bench
            from bringup.profiles.store import now_iso

            outcome["started"] = outcome["started"] or now_iso()
            info = select_device(ctx.device).info
            best.update(quick_bench.better(best, quick_bench.measure(torch.device(ctx.device), info)))
            if turn // turns == BENCH_ROUNDS - 1:
                quick_bench.record(ctx.profile_path, info, best, outcome["started"])
        except Exception as exc:  # recorded; the turns go on
            outcome["error"] = first_line(exc)
            log.warning("bench failed on rank %d: %s", ctx.setup.rank, outcome["error"])

    # contention is a host's own: the ranks of one host take turns, the hosts measure at the same time
    take_turns(ctx, my_turn, BENCH_ROUNDS * turns)
    return StageResult(0 if outcome["error"] is None else -1, round(time.perf_counter() - start, 3),
                       outcome["error"])


def run_links(ctx: RankContext) -> StageResult:
    from bringup.probes.fleet.links import link_name, ping_pong

    start = time.perf_counter()
    world = ctx.setup.world_size

    def link_turn(turn: int) -> None:
        sender = turn % world
        receiver = (sender + 1) % world
        figure = ping_pong(ctx.setup, sender, receiver, ctx.options.link_bytes)
        if figure is not None:
            name = link_name(sender, receiver)
            ctx.links[name] = max(round(figure, 3), ctx.links.get(name, 0.0))

    if world > 1:
        take_turns(ctx, link_turn, LINK_ROUNDS * world)
    return StageResult(0, round(time.perf_counter() - start, 3))


def run_stage(stage: str, ctx: RankContext) -> StageResult:
    if stage == "bench":
        return run_bench(ctx)
    if stage == "links":
        return run_links(ctx)
    return run_command_stage(stage, ctx)
