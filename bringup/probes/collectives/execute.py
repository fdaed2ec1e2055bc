"""Run a plan's cases on an initialised process group, on one rank, reporting through a Channel.

Each case: this rank reaches the case (test faults act here), passes a monitored barrier (gloo names
any rank that does not arrive in time), then runs the collective warm-up + timed repetitions. Every
repetition restores the inputs, poisons the outputs, runs the call between two device syncs and
counts the wrong elements of the output against the exact expected result.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from bringup.probes.collectives.faults import FaultSpec
from bringup.probes.collectives.ops import CaseContext, SkipCase, element_count, prepare
from bringup.probes.collectives.patterns import SUPPORTED_DTYPES, value_bound
from bringup.probes.collectives.plan import CaseSpec, Plan
from bringup.probes.collectives.ranks.channel import Channel

_SUSPECTS = re.compile(r"Ranks? ([\d,\s]+) failed to pass monitoredBarrier")


class MonitorFailure(RuntimeError):
    """The monitored barrier before a case failed; `suspects` are the ranks torch named (may be empty)."""

    def __init__(self, detail: str, suspects: list[int]) -> None:
        super().__init__(detail)
        self.detail = detail
        self.suspects = suspects


@dataclass
class CaseResult:
    index: int
    op: str
    dtype: str
    size_bytes: int
    count: int
    status: str                 # pass | fail | error | skipped | unsupported (this rank's view)
    wrong: int = 0              # worst repetition's wrong elements in this rank's output
    median_s: float | None = None
    iters: int = 0
    error: str | None = None


@dataclass
class RankSetup:
    rank: int
    world_size: int
    device: torch.device
    synchronize: Callable[[], None]
    monitor_group: dist.ProcessGroup | None   # gloo group for monitored_barrier; None = the default group


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


def monitored_barrier(setup: RankSetup, timeout_s: float) -> None:
    """gloo's monitored barrier: rank 0 waits for each rank and names those missing after the timeout."""
    try:
        dist.monitored_barrier(group=setup.monitor_group, timeout=timedelta(seconds=timeout_s),
                               wait_all_ranks=True)
    except RuntimeError as exc:
        match = _SUSPECTS.search(str(exc))
        suspects = [int(r) for r in re.findall(r"\d+", match.group(1))] if match else []
        raise MonitorFailure(first_line(exc), suspects) from exc


def dtype_refusal(dtype: torch.dtype, device: torch.device) -> str | None:
    """The device's own error when it cannot hold `dtype` (as MPS refuses float64), else None. Every rank of a
    uniform world gets the same answer, so all of them skip the case together."""
    try:
        torch.empty(1, dtype=dtype, device=device)
    except (TypeError, RuntimeError) as exc:
        return first_line(exc)
    return None


def barrier_timeout(plan: Plan) -> float:
    """The monitored barrier gives up before the supervisor would, so torch's naming arrives first."""
    return max(0.5, 0.75 * plan.timeout_s)


def run_plan(plan: Plan, setup: RankSetup, channel: Channel, fault: FaultSpec | None) -> None:
    """Run every case; raises MonitorFailure when the world is no longer complete."""
    for case in plan.cases():
        if fault is not None:
            fault.act_on_arrival(setup.rank, case.op)
        channel.send("arrive", index=case.index, op=case.op, dtype=case.dtype, size_bytes=case.size_bytes)
        monitored_barrier(setup, barrier_timeout(plan))
        result = run_case(plan, case, setup, fault)
        channel.send("result", **asdict(result))


def run_case(plan: Plan, case: CaseSpec, setup: RankSetup, fault: FaultSpec | None) -> CaseResult:
    dtype = SUPPORTED_DTYPES.get(case.dtype, torch.float32)
    count = element_count(case.op, case.size_bytes, dtype.itemsize, setup.world_size)
    result = CaseResult(case.index, case.op, case.dtype, count * dtype.itemsize, count, "pass")
    bound = value_bound(dtype, setup.world_size)
    if bound is None:
        result.status, result.error = "unsupported", (
            f"{case.dtype} cannot hold an exact sum over {setup.world_size} ranks")
        return result
    refused = dtype_refusal(dtype, setup.device)
    if refused is not None:
        result.status, result.error = "unsupported", f"{setup.device} refuses {case.dtype}: {refused}"
        return result
    corrupt = fault.corrupt_elements(setup.rank, case.op) if fault is not None else 0
    ctx = CaseContext(setup.rank, setup.world_size, dtype, setup.device, bound, count, corrupt, case.index)
    try:
        prepared = prepare(case.op, ctx)
    except SkipCase as exc:
        result.status, result.error = "skipped", str(exc)
        return result
    warmup, iters = plan.repetitions(case.size_bytes)
    times: list[float] = []
    try:
        for repetition in range(warmup + iters):
            prepared.reset()
            setup.synchronize()
            dist.barrier(group=setup.monitor_group)
            start = time.perf_counter()
            prepared.run()
            setup.synchronize()
            elapsed = time.perf_counter() - start
            result.wrong = max(result.wrong, prepared.count_wrong())
            if repetition >= warmup:
                times.append(elapsed)
    except Exception as exc:  # a collective that raises: record it, the next barrier tests the world
        result.status, result.error = "error", first_line(exc)
        return result
    result.iters = len(times)
    result.median_s = statistics.median(times) if times else None
    result.status = "fail" if result.wrong else "pass"
    return result
