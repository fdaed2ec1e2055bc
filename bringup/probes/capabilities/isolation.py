"""Run checks in a worker process so a hang or crash costs one check, not the probe."""

import multiprocessing as mp
import time
from multiprocessing.connection import Connection
from typing import Any

import torch

from bringup.probes.capabilities.registry import resolve
from bringup.probes.capabilities.result import error_text, unknown, unsupported


def run_inline(check_id: str, device: str) -> dict[str, Any]:
    start = time.perf_counter()
    try:
        result = resolve(check_id)(torch.device(device))
    except Exception as exc:
        result = unsupported(f"the check raised {error_text(exc)}")
    result["seconds"] = round(time.perf_counter() - start, 4)
    return result


def worker_loop(conn: Connection) -> None:
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        conn.send(run_inline(*message))


class IsolatedRunner:
    """One long-lived worker; replaced after a timeout or a crash."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.context = mp.get_context("spawn")
        self.process: Any = None
        self.conn: Connection | None = None

    def start(self) -> None:
        parent, child = self.context.Pipe()
        self.process = self.context.Process(target=worker_loop, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.conn = parent

    def stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if not kill and self.conn is not None:
            try:
                self.conn.send(None)
                self.process.join(timeout=5)
            except (OSError, BrokenPipeError):
                pass
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.process, self.conn = None, None

    def run(self, check_id: str, device: str) -> dict[str, Any]:
        if self.process is None or not self.process.is_alive():
            self.start()
        assert self.conn is not None
        start = time.perf_counter()
        self.conn.send((check_id, device))
        if not self.conn.poll(self.timeout_s):
            self.stop(kill=True)
            result = unknown(f"the check did not finish within {self.timeout_s:g}s; its worker was killed")
        else:
            try:
                return self.conn.recv()
            except EOFError:
                self.process.join(timeout=2)
                code = self.process.exitcode
                self.stop(kill=True)
                how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
                result = unsupported(f"the check crashed its worker process ({how})")
        result["seconds"] = round(time.perf_counter() - start, 4)
        return result

    def __enter__(self) -> "IsolatedRunner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
