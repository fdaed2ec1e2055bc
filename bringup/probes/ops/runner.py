"""Run a list of tasks through an executor, checkpointing results as they arrive."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bringup.probes.ops.tasks import task_label

Result = dict[str, Any]
Task = dict[str, Any]


class Executor(Protocol):
    isolated: bool

    def run(self, task: Task) -> Result: ...
    def close(self) -> None: ...


def op_task(key: Any, timeout_s: float | None = None) -> Task:
    task: Task = {"kind": "op", "op": key.op, "dtype": key.dtype, "case": key.case}
    if timeout_s:
        task["timeout_s"] = timeout_s
    return task


def task_key(task_or_result: dict[str, Any]) -> tuple[str, ...]:
    """The resume key: (op, dtype, case) for op cases, (target, dtype, backend) for compiled ones."""
    if "op" in task_or_result:
        return ("op", task_or_result["op"], task_or_result["dtype"], task_or_result["case"])
    return ("compiled", task_or_result["target"], task_or_result["dtype"], task_or_result["backend"])


@dataclass
class Checkpointer:
    """Buffers results and hands them to `flush_fn` at most every `interval_s` seconds.

    Crashes and timeouts are flushed at once (they are the results most worth keeping).
    `flush_fn(results, final)` must write atomically; `final` is True for the last call.
    """

    flush_fn: Callable[[list[Result], bool], None]
    interval_s: float = 1.0
    pending: list[Result] = field(default_factory=list)
    last_flush: float = field(default_factory=time.monotonic)
    flushes: int = 0

    def add(self, result: Result) -> None:
        self.pending.append(result)
        urgent = result.get("status") in ("crashed", "timeout")
        if urgent or time.monotonic() - self.last_flush >= self.interval_s:
            self.flush(final=False)

    def flush(self, final: bool) -> None:
        if not self.pending and not final:
            return
        batch, self.pending = self.pending, []
        self.flush_fn(batch, final)
        self.flushes += 1
        self.last_flush = time.monotonic()


def run_tasks(tasks: list[Task], executor: Executor, on_result: Callable[[Task, Result], None],
              on_start: Callable[[Task, str], None] | None = None) -> None:
    """Run every task in order; each result goes to on_result as soon as it exists."""
    for task in tasks:
        if on_start is not None:
            on_start(task, task_label(task))
        on_result(task, executor.run(task))
