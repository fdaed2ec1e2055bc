"""Run a list of tasks through an executor, checkpointing results as they arrive."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bringup.probes.ops.tasks import task_label
from bringup.profiles.sections.ops import VerifyOpsRecord

Result = VerifyOpsRecord
Task = dict[str, Any]


class Executor(Protocol):
    isolated: bool

    def run(self, task: Task) -> Result: ...
    def close(self) -> None: ...


def op_task(key: Any, timeout_s: float | None = None) -> Task:
    task: Task = {"kind": "op", "op": key.op, "dtype": key.dtype, "case": key.case, "case_id": key.case_id}
    if timeout_s:
        task["timeout_s"] = timeout_s
    return task


@dataclass
class Checkpointer:
    """Buffers results and hands them to `flush_fn` every `interval_s` seconds (0: after every result).

    Crashes and timeouts are flushed at once (they are the results most worth keeping). A profile
    write rewrites the whole file, so it gets slower as results accumulate: the interval stretches to
    WRITE_SHARE_FACTOR times the last write's duration, keeping writes under ~1/6 of the run time.
    `flush_fn(results, final)` must write atomically; `final` is True for the last call.
    """

    flush_fn: Callable[[list[Result], bool], None]
    interval_s: float = 1.0
    pending: list[Result] = field(default_factory=list)
    last_flush: float = field(default_factory=time.monotonic)
    last_write_s: float = 0.0
    flushes: int = 0

    WRITE_SHARE_FACTOR = 5.0

    def due(self) -> bool:
        if self.interval_s <= 0:
            return True
        wait = max(self.interval_s, self.WRITE_SHARE_FACTOR * self.last_write_s)
        return time.monotonic() - self.last_flush >= wait

    def add(self, result: Result) -> None:
        self.pending.append(result)
        if result.status in ("crashed", "timeout") or self.due():
            self.flush(final=False)

    def flush(self, final: bool) -> None:
        if not self.pending and not final:
            return
        batch, self.pending = self.pending, []
        start = time.monotonic()
        self.flush_fn(batch, final)
        self.last_write_s = time.monotonic() - start
        self.flushes += 1
        self.last_flush = time.monotonic()


def run_tasks(tasks: list[Task], executor: Executor, on_result: Callable[[Task, Result], None],
              on_start: Callable[[Task, str], None] | None = None) -> None:
    """Run every task in order; each result goes to on_result as soon as it exists."""
    for task in tasks:
        if on_start is not None:
            on_start(task, task_label(task))
        on_result(task, executor.run(task))
