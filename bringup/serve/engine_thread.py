"""The one thread that builds the engine and runs every step of it, for the server's whole life.

torch's CPU kernels and bringup's host kernels run on OpenMP, and each OS thread that opens a parallel region gets a
team of worker threads of its own. Once the process holds more OpenMP threads than CPUs, libgomp stops spinning at
its barriers and sleeps instead, and the decode step (dozens of barriers) slows 2-3x. A server that built its engine
on the main thread (start-up timing opens parallel regions) and stepped it on another held two teams: on a 2-core
machine, streamed decode ran at 25-40 tok/s against generate's 70 with the same plan. Doing all of the engine's work
on one thread keeps one team.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")


class EngineThread:
    """Runs the callables handed to it one after another, on one daemon thread."""

    def __init__(self, name: str = "bringup-engine") -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._thread.start()

    def submit(self, function: Callable[..., T], *args: object) -> Future:
        """`function(*args)` queued behind the jobs already handed over; its Future holds the result or exception."""
        done: Future = Future()
        self._jobs.put((function, args, done))
        return done

    def call(self, function: Callable[..., T], *args: object) -> T:
        """`function(*args)` run on this thread; its result, or its exception raised here."""
        return self.submit(function, *args).result()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def _work(self) -> None:
        while True:
            function, args, done = self._jobs.get()
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(function(*args))
            except BaseException as exc:  # handed to the caller, who decides; this thread serves the next job
                done.set_exception(exc)
