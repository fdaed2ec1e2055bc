"""Crash isolation: a long-lived worker subprocess that runs tasks sent as JSON lines over a pipe.

The parent (IsolatedExecutor) sends one task per line on the worker's stdin and waits for one JSON line on
a private pipe, with a deadline: the result record's model_dump, read back with model_validate. A worker
that dies (signal, abort, exit) yields a `crashed` result naming the signal; one that misses the deadline
is killed and yields `timeout`. Either way the next task starts a fresh worker. The worker's own
stdout/stderr go to the parent's stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

import torch

from bringup.probes.ops.judge.error_kinds import poisons_device
from bringup.probes.ops.tasks import execute_task, failure_result, record_type
from bringup.profiles.sections.ops import VerifyOpsRecord

STARTUP_TIMEOUT_S = 300.0


def _signal_name(returncode: int) -> str:
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


class WorkerDied(Exception):
    pass


class WorkerStartError(RuntimeError):
    """The worker subprocess could not start (import error, no such device...)."""


class WorkerProcess:
    """One worker subprocess and its pipes."""

    def __init__(self, device: str, env: dict[str, str] | None = None) -> None:
        read_fd, write_fd = os.pipe()
        cmd = [sys.executable, "-m", "bringup.probes.ops.worker", device, str(write_fd)]
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=sys.stderr.fileno() if _has_fileno() else None,
            pass_fds=(write_fd,), env=env, start_new_session=True,
        )
        os.close(write_fd)
        self._fd = read_fd
        self._buffer = b""
        self.started = time.monotonic()

    def _read_line(self, deadline: float) -> bytes | None:
        """One line from the result pipe; None on timeout; WorkerDied on EOF."""
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([self._fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self._fd, 1 << 16)
            if not chunk:
                raise WorkerDied()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def wait_ready(self, timeout: float) -> None:
        line = self._read_line(time.monotonic() + timeout)
        if line is None:
            raise TimeoutError(f"worker did not start within {timeout:.0f} s")

    def request(self, task: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send a task; its result as sent (a record's model_dump), or None on timeout. WorkerDied when it dies."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(task).encode() + b"\n")
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise WorkerDied() from exc
        line = self._read_line(time.monotonic() + timeout)
        return None if line is None else json.loads(line)

    def returncode(self, wait_s: float = 5.0) -> int | None:
        try:
            return self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.close_pipes()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
            if self.returncode(5.0) is None:
                self.proc.kill()
                self.proc.wait()
        self.close_pipes()

    def close_pipes(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _has_fileno() -> bool:
    try:
        sys.stderr.fileno()
        return True
    except (AttributeError, OSError, ValueError):
        return False


class IsolatedExecutor:
    """Runs tasks in a worker subprocess, replacing the worker after a crash or a timeout."""

    isolated = True

    def __init__(self, device: str, timeout_s: float, env: dict[str, str] | None = None) -> None:
        self.device = device
        self.timeout_s = timeout_s
        self.env = env
        self.worker: WorkerProcess | None = None
        self.workers_started = 0

    def _ensure_worker(self) -> WorkerProcess:
        if self.worker is None:
            self.worker = WorkerProcess(self.device, self.env)
            self.workers_started += 1
            try:
                self.worker.wait_ready(STARTUP_TIMEOUT_S)
            except (TimeoutError, WorkerDied) as exc:
                worker, self.worker = self.worker, None
                worker.kill()
                code = worker.proc.returncode
                raise WorkerStartError(
                    f"the verify-ops worker process did not start ({type(exc).__name__}"
                    f"{f', exit status {code}' if code is not None else ''}); its error is printed above. "
                    "Try --no-isolate to see it in-process") from exc
        return self.worker

    def run(self, task: dict[str, Any]) -> VerifyOpsRecord:
        worker = self._ensure_worker()
        timeout = float(task.get("timeout_s") or self.timeout_s)
        start = time.monotonic()
        try:
            sent = worker.request(task, timeout)
        except WorkerDied:
            code = worker.returncode()
            self.worker = None
            worker.close_pipes()
            how = _signal_name(code) if code is not None else "unknown cause"
            return failure_result(task, "crashed", f"worker died ({how}) while running this case",
                                  time.monotonic() - start)
        if sent is None:
            self.worker = None
            worker.kill()
            return failure_result(task, "timeout", f"no result within {timeout:g} s; worker killed",
                                  time.monotonic() - start)
        result = record_type(task).model_validate(sent)
        if poisons_device(result.message):
            self.worker = None  # a sticky device error: later cases get a fresh process and context
            worker.close()
        return result

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None


class InProcessExecutor:
    """--no-isolate: run tasks in this process (fast; a crash takes the run down, a hang hangs it)."""

    isolated = False

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)

    def run(self, task: dict[str, Any]) -> VerifyOpsRecord:
        return execute_task(task, self.device)

    def close(self) -> None:
        pass


def worker_main(device_name: str, result_fd: int) -> None:
    """Entry point in the subprocess: serve tasks from stdin until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides about Ctrl-C
    out = os.fdopen(result_fd, "wb", buffering=0)
    device = torch.device(device_name)
    from bringup.probes.ops.catalog import load_catalog

    load_catalog()  # imports plugins (kernel overrides, compile backends) before the first task
    out.write(b'{"ready": true}\n')
    for raw in sys.stdin.buffer:
        if not raw.strip():
            continue
        task = json.loads(raw)
        result = execute_task(task, device)
        out.write(json.dumps(result.model_dump()).encode() + b"\n")


if __name__ == "__main__":
    worker_main(sys.argv[1], int(sys.argv[2]))
