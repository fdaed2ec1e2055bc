"""Starting the rank processes and ending them, two ways:

fork   one helper process (zygote.py) imports torch once and forks the N ranks -- fast; default.
spawn  N fresh interpreters (`python -m ...worker`) -- for device runtimes that are not fork-safe.

Either way every process is in a process group of its own (a terminal Ctrl-C reaches only the
launcher, which ends them), has PR_SET_PDEATHSIG (it dies if its parent dies), and is ended through a
psutil handle taken when it started (so a recycled pid is never signalled).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

import bringup
from bringup.probes.collectives.ranks.channel import FD_ENV_VAR, LineReader
from bringup.probes.collectives.ranks.launch_util import child_setup
from bringup.probes.collectives.ranks.worker import PARENT_ENV_VAR
from bringup.probes.collectives.ranks.zygote import ZYGOTE_ENV_VAR

START_METHODS = ("fork", "spawn")
TERMINATE_GRACE_S = 2.0


def python_env(base: dict[str, str]) -> dict[str, str]:
    """The environment for a child: this package importable, unbuffered output."""
    env = {k: v for k, v in base.items() if not k.startswith(("TORCHELASTIC_", "MASTER_"))}
    package_root = str(Path(bringup.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class RankProcesses:
    """The launch's processes: which pid each rank has, which have exited, and ending them all."""

    def __init__(self) -> None:
        self.pids: dict[int, int] = {}
        self.exit_codes: dict[int, int] = {}
        self._handles: list[psutil.Process] = []
        self._popens: list[subprocess.Popen] = []

    def refresh(self) -> None:
        """Update exit_codes for ranks that ended."""
        raise NotImplementedError

    def _track(self, pid: int) -> None:
        with contextlib.suppress(psutil.Error):
            self._handles.append(psutil.Process(pid))

    def end_all(self) -> None:
        """SIGTERM what still runs, SIGKILL it after a grace, and reap our direct children."""
        _terminate([h for h in self._handles if h.pid != self._leader_pid()])
        _terminate([h for h in self._handles if h.pid == self._leader_pid()], first_wait=TERMINATE_GRACE_S)
        for popen in self._popens:
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout=TERMINATE_GRACE_S)
        self.refresh()

    def _leader_pid(self) -> int | None:
        """A process to end only after the ranks (the zygote, which reaps them); None if there is none."""
        return None


def _terminate(handles: list[psutil.Process], first_wait: float = 0.0) -> None:
    """Give processes `first_wait` to end by themselves, then SIGTERM, then SIGKILL."""
    alive = [h for h in handles if _running(h)]
    if first_wait and alive:
        _, alive = psutil.wait_procs(alive, timeout=first_wait)
    for handle in alive:
        with contextlib.suppress(psutil.Error):
            handle.terminate()
    _, alive = psutil.wait_procs(alive, timeout=TERMINATE_GRACE_S)
    for handle in alive:
        with contextlib.suppress(psutil.Error):
            handle.kill()
    psutil.wait_procs(alive, timeout=TERMINATE_GRACE_S)


def _running(handle: psutil.Process) -> bool:
    try:
        return handle.is_running() and handle.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class SpawnedRanks(RankProcesses):
    def __init__(self, env: dict[str, str], write_fds: dict[int, int], logs: dict[int, Path]) -> None:
        super().__init__()
        leader = 0
        for rank, fd in write_fds.items():
            rank_env = {**env, "RANK": str(rank), "LOCAL_RANK": str(rank), FD_ENV_VAR: str(fd),
                        PARENT_ENV_VAR: str(os.getpid())}
            with open(logs[rank], "wb") as log:
                group = leader
                popen = subprocess.Popen(
                    [sys.executable, "-m", "bringup.probes.collectives.ranks.worker"], env=rank_env,
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, pass_fds=(fd,),
                    preexec_fn=lambda group=group: child_setup(group),
                )
            leader = leader or popen.pid
            self._popens.append(popen)
            self.pids[rank] = popen.pid
            self._track(popen.pid)
        self._rank_of = {p.pid: r for r, p in zip(write_fds, self._popens)}

    def refresh(self) -> None:
        for popen in self._popens:
            code = popen.poll()
            if code is not None:
                self.exit_codes.setdefault(self._rank_of[popen.pid], code)


class ForkedRanks(RankProcesses):
    def __init__(self, env: dict[str, str], write_fds: dict[int, int], logs: dict[int, Path],
                 zygote_log: Path) -> None:
        super().__init__()
        control_read, control_write = os.pipe()
        layout = {"control_fd": control_write,
                  "ranks": [{"rank": r, "fd": fd, "log": str(logs[r])} for r, fd in write_fds.items()]}
        try:
            with open(zygote_log, "wb") as log:
                self.zygote = subprocess.Popen(
                    [sys.executable, "-m", "bringup.probes.collectives.ranks.zygote"],
                    env={**env, ZYGOTE_ENV_VAR: json.dumps(layout), PARENT_ENV_VAR: str(os.getpid())},
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    pass_fds=(control_write, *write_fds.values()), preexec_fn=lambda: child_setup(0),
                )
        finally:
            os.close(control_write)
        os.set_blocking(control_read, False)
        self._control: int | None = control_read
        self._reader = LineReader()
        self._popens.append(self.zygote)
        self._track(self.zygote.pid)
        self._world_size = len(write_fds)

    def refresh(self) -> None:
        self._read_control()
        code = self.zygote.poll()
        if code is not None:
            self._read_control()
            for rank in range(self._world_size):  # ranks die with the zygote (PR_SET_PDEATHSIG)
                self.exit_codes.setdefault(rank, code if code else -9)

    def _read_control(self) -> None:
        while self._control is not None:
            try:
                data = os.read(self._control, 1 << 16)
            except BlockingIOError:
                return
            if not data:
                os.close(self._control)
                self._control = None
                return
            for message in self._reader.feed(data):
                if message.get("type") == "forked":
                    for rank, pid in message["pids"].items():
                        self.pids[int(rank)] = int(pid)
                        self._track(int(pid))
                elif message.get("type") == "exit":
                    self.exit_codes.setdefault(int(message["rank"]), int(message["code"]))

    def _leader_pid(self) -> int | None:
        return self.zygote.pid

    def end_all(self) -> None:
        super().end_all()
        if self._control is not None:
            with contextlib.suppress(OSError):
                os.close(self._control)
            self._control = None
