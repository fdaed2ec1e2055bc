"""Spawn N local ranks and supervise them: progress, deaths, hangs, timeouts -- and always clean up.

The launcher hosts the rendezvous TCPStore itself on 127.0.0.1 with an OS-chosen free port (no port
race), starts the ranks (forked from one helper that imported torch, or as fresh interpreters; see
processes.py) in a process group of their own (so a terminal Ctrl-C reaches only the launcher, which
then ends them) with PR_SET_PDEATHSIG (so they die if their parent is killed), and reads each rank's
JSON-line reports from its own pipe.

A fault is any of: a rank that ends without reporting `done` (named, with its exit code), a rank
that gloo's monitored barrier names as missing, a rank that makes no progress for `timeout_s` while
others are ahead, or a rank that is not up within `startup_timeout_s`. After the first fault the
launcher waits a short grace for corroborating reports, then ends every process it started.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch.distributed as dist

from bringup.errors import BringupError
from bringup.probes.collectives.faults import ENV_VAR as FAULT_ENV_VAR
from bringup.probes.collectives.plan import Plan
from bringup.probes.collectives.ranks.channel import LineReader
from bringup.probes.collectives.ranks.processes import ForkedRanks, RankProcesses, SpawnedRanks, python_env
from bringup.probes.collectives.ranks.worker import PLAN_ENV_VAR, STORE_ENV_VAR

FAULT_GRACE_S = 0.5      # after the first fault: time to collect the other ranks' view
_POLL_S = 0.05


@dataclass
class Fault:
    rank: int | None
    kind: str           # exited | hung | startup | error | interrupted
    detail: str


@dataclass
class RankState:
    rank: int
    fd: int | None
    log_path: Path
    reader: LineReader = field(default_factory=LineReader)
    booted: bool = False
    ready: dict[str, Any] | None = None
    arrived: int = -1                       # last case index this rank reached
    arrived_case: str = "start-up"         # description of that case
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    reported_failure: bool = False          # sent `error` or `fault` itself
    done: bool = False
    exit_code: int | None = None

    def position(self) -> str:
        """Where the rank was: 'during start-up', 'during case 3 (...)' or 'after case 3 (...)'."""
        if self.arrived < 0:
            return "during start-up" if self.ready is None else "before the first case"
        return f"{'after' if self.arrived in self.results else 'during'} {self.arrived_case}"


@dataclass
class LaunchOutcome:
    world_size: int
    results: dict[int, dict[int, dict[str, Any]]]   # rank -> case index -> result message
    ready: dict[int, dict[str, Any]]                 # rank -> its `ready` message
    faults: list[Fault]
    seconds: float
    pids: dict[int, int] = field(default_factory=dict)     # rank -> pid (for the record and the tests)
    arrived: dict[int, int] = field(default_factory=dict)  # rank -> last case index it reached
    log_tails: dict[int, str] = field(default_factory=dict)
    detected_after_s: float | None = None   # how long nothing had moved when the first fault was seen


class Interrupted(KeyboardInterrupt):
    """SIGTERM during supervision; handled like Ctrl-C (processes are ended, then it propagates)."""


def launch(plan: Plan, world_size: int, *, start_method: str = "fork", startup_timeout_s: float = 120.0,
           fault_spec: str | None = None, on_case_done: Callable[[int], None] | None = None,
           extra_env: dict[str, str] | None = None) -> LaunchOutcome:
    """Run `plan` on `world_size` local ranks and return what they reported and any faults.
    `extra_env` is added to every rank's environment (e.g. worker.ENTRY_ENV_VAR to run other per-rank work).
    KeyboardInterrupt (and SIGTERM, as Interrupted) end every process before propagating."""
    started = time.monotonic()
    try:
        store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True, wait_for_workers=False,
                              timeout=timedelta(seconds=max(plan.timeout_s, startup_timeout_s)))
    except (RuntimeError, OSError) as exc:
        raise BringupError(f"cannot open the rendezvous store on 127.0.0.1 ({exc}); check that loopback "
                           "TCP is allowed") from None
    log_dir = Path(tempfile.mkdtemp(prefix="bringup-collectives-"))
    pipes = {rank: os.pipe() for rank in range(world_size)}
    ranks = [RankState(rank, read_fd, log_dir / f"rank{rank}.log") for rank, (read_fd, _) in pipes.items()]
    processes: RankProcesses | None = None
    faults: list[Fault] = []
    detected_after: float | None = None
    try:
        with _terminate_as_interrupt():
            env = {**_launch_env(plan, world_size, store.port, fault_spec), **(extra_env or {})}
            write_fds = {rank: write_fd for rank, (_, write_fd) in pipes.items()}
            logs = {s.rank: s.log_path for s in ranks}
            try:
                if start_method == "fork":
                    processes = ForkedRanks(env, write_fds, logs, log_dir / "zygote.log")
                else:
                    processes = SpawnedRanks(env, write_fds, logs)
            finally:
                for fd in write_fds.values():
                    os.close(fd)
            for state in ranks:
                os.set_blocking(state.fd, False)
            faults, detected_after = _supervise(ranks, processes, plan, startup_timeout_s, on_case_done)
    finally:
        if processes is not None:
            processes.end_all()
        for state in ranks:
            if state.fd is not None:
                with contextlib.suppress(OSError):
                    os.close(state.fd)
                state.fd = None
        tails = {s.rank: _tail(s.log_path) for s in ranks}
        if processes is None or not processes.pids:
            tails[-1] = _tail(log_dir / "zygote.log")
        shutil.rmtree(log_dir, ignore_errors=True)
        del store
    return LaunchOutcome(world_size, {s.rank: s.results for s in ranks},
                         {s.rank: s.ready for s in ranks if s.ready}, faults,
                         time.monotonic() - started, dict(processes.pids) if processes else {},
                         {s.rank: s.arrived for s in ranks}, tails, detected_after)


def _launch_env(plan: Plan, world_size: int, port: int, fault_spec: str | None) -> dict[str, str]:
    env = python_env(dict(os.environ))
    env.update({"WORLD_SIZE": str(world_size), "LOCAL_WORLD_SIZE": str(world_size),
                PLAN_ENV_VAR: plan.to_json(), STORE_ENV_VAR: f"127.0.0.1:{port}"})
    # keep gloo's own connections on the loopback interface
    env.setdefault("GLOO_SOCKET_IFNAME", "lo0" if sys.platform == "darwin" else "lo")
    env.pop(FAULT_ENV_VAR, None)
    if fault_spec:
        env[FAULT_ENV_VAR] = fault_spec
    return env


# -- supervision -------------------------------------------------------------------------------------

def _supervise(ranks: list[RankState], processes: RankProcesses, plan: Plan, startup_timeout_s: float,
               on_case_done: Callable[[int], None] | None) -> tuple[list[Fault], float | None]:
    """Watch the ranks until all are done or a fault is seen; returns the faults and how long nothing
    had moved when the first fault was detected."""
    selector = selectors.DefaultSelector()
    for state in ranks:
        selector.register(state.fd, selectors.EVENT_READ, state)
    faults: list[Fault] = []
    start = last_progress = time.monotonic()
    first_fault_at: float | None = None
    detected_after: float | None = None
    completed = 0
    try:
        while True:
            quiet_since = last_progress
            for key, _ in selector.select(timeout=_POLL_S):
                state: RankState = key.data
                if _read(state, selector, faults):
                    last_progress = time.monotonic()
            processes.refresh()
            judge_exits(ranks, processes.exit_codes, selector, faults)
            done_now = min(len(s.results) for s in ranks)
            if on_case_done is not None and done_now > completed:
                on_case_done(done_now - completed)
            completed = done_now
            now = time.monotonic()
            if all(s.exit_code is not None for s in ranks):
                _drain(ranks, selector, faults)
                break
            if not faults:
                faults.extend(_stall_faults(ranks, plan, now, start, last_progress, startup_timeout_s))
            if faults and first_fault_at is None:
                first_fault_at = now
                detected_after = now - quiet_since
            if first_fault_at is not None and now - first_fault_at >= FAULT_GRACE_S:
                _drain(ranks, selector, faults)
                break
    finally:
        selector.close()
    return faults, detected_after


def _read(state: RankState, selector: selectors.BaseSelector, faults: list[Fault]) -> bool:
    """Read what the rank sent; True when it reported progress."""
    try:
        data = os.read(state.fd, 1 << 16)
    except BlockingIOError:
        return False
    if not data:
        selector.unregister(state.fd)
        os.close(state.fd)
        state.fd = None
        return False
    for message in state.reader.feed(data):
        handle_message(state, message, faults)
    return True


def _drain(ranks: list[RankState], selector: selectors.BaseSelector, faults: list[Fault]) -> None:
    for state in ranks:
        while state.fd is not None and _read(state, selector, faults):
            pass


def handle_message(state: RankState, message: dict[str, Any], faults: list[Fault]) -> None:
    """Update a rank's state from one of its messages; `fault` and `error` messages add faults."""
    kind = message.get("type")
    if kind == "boot":
        state.booted = True
    elif kind == "ready":
        state.ready = message
    elif kind == "arrive":
        state.arrived = int(message["index"])
        state.arrived_case = _describe(message)
    elif kind == "result":
        state.results[int(message["index"])] = message
    elif kind == "done":
        state.done = True
    elif kind == "fault":
        state.reported_failure = True
        for suspect in message.get("suspects") or []:
            if not any(f.rank == suspect and f.kind in ("hung", "exited") for f in faults):
                faults.append(Fault(suspect, "hung", (
                    f"rank {suspect} did not reach {state.arrived_case} in time: named by gloo's "
                    f"monitored barrier on rank {state.rank} ({message.get('detail')})")))
        if not message.get("suspects"):
            faults.append(Fault(state.rank, "error", f"rank {state.rank}: {message.get('detail')}"))
    elif kind == "error":
        state.reported_failure = True
        faults.append(Fault(state.rank, "error",
                            f"rank {state.rank} failed {state.position()}: {message.get('detail')}"))


def judge_exits(ranks: list[RankState], exit_codes: dict[int, int], selector: selectors.BaseSelector,
                faults: list[Fault]) -> None:
    """Judge each rank that has newly exited, after reading what it wrote before it went: a rank that sent
    `done` and exited between the last read and the exit poll still has `done` in its pipe."""
    for state in ranks:
        code = exit_codes.get(state.rank)
        if code is not None and state.exit_code is None:
            while state.fd is not None and _read(state, selector, faults):
                pass
        _check_exit(state, code, faults)


def _check_exit(state: RankState, code: int | None, faults: list[Fault]) -> None:
    if state.exit_code is not None or code is None:
        return
    state.exit_code = code
    if (state.done and code == 0) or state.reported_failure:
        return
    how = f"was killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
    faults.append(Fault(state.rank, "exited", f"rank {state.rank} {how} {state.position()} "
                                              f"without reporting an error"))


def _stall_faults(ranks: list[RankState], plan: Plan, now: float, start: float, last_progress: float,
                  startup_timeout_s: float) -> list[Fault]:
    """Faults for ranks that are not up in time, or that fall behind while nothing moves."""
    if not all(s.ready for s in ranks):
        if now - start < startup_timeout_s:
            return []
        return [Fault(s.rank, "startup", f"rank {s.rank} did not join the process group within "
                                         f"{startup_timeout_s:g} s ({'' if s.booted else 'never '}booted)")
                for s in ranks if not s.ready]
    if now - last_progress < plan.timeout_s:
        return []
    live = [s for s in ranks if not s.done]
    ahead = max(s.arrived for s in live)
    behind = [s for s in live if s.arrived < ahead]
    if behind:
        return [Fault(s.rank, "hung", f"rank {s.rank} made no progress for {plan.timeout_s:g} s: it is "
                                      f"{s.position()} while other ranks reached case {ahead}")
                for s in behind]
    where = live[0].arrived_case if live else "the end"
    return [Fault(None, "hung", f"no rank made progress for {plan.timeout_s:g} s inside {where}: all ranks "
                                f"are blocked in the collective library")]


def _describe(message: dict[str, Any]) -> str:
    from bringup.probes.collectives.sizes import format_bytes

    if message.get("label"):  # per-rank work other than a plan's cases names its own steps
        return str(message["label"])
    if message.get("op") == "barrier":
        return f"case {message['index']} (barrier)"
    return (f"case {message['index']} ({message.get('op')} {message.get('dtype')} "
            f"{format_bytes(int(message.get('size_bytes', 0)))})")


# -- helpers ---------------------------------------------------------------------------------------

def _tail(path: Path, lines: int = 12) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While supervising in the main thread, SIGTERM raises Interrupted so cleanup runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupted(signum: int, frame: Any) -> None:
        raise Interrupted()

    previous = signal.signal(signal.SIGTERM, raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
