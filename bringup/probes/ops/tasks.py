"""Tasks a worker executes: one op case, one eager-vs-compiled or one eager-vs-replay comparison. A task is a plain
dict (it crosses the worker pipe as JSON); its result is the profile record itself (OpCaseRecord, CompiledRecord or
GraphReplayRecord)."""

from __future__ import annotations

from typing import Any, Literal

import torch

from bringup.probes.ops.catalog import load_catalog
from bringup.probes.ops.execute import run_case
from bringup.probes.ops.spec import CaseKey
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord, VerifyOpsRecord

FailureStatus = Literal["error", "crashed", "timeout"]


def task_label(task: dict[str, Any]) -> str:
    if task["kind"] == "op":
        return str(CaseKey(task["op"], task["dtype"], task["case"]))
    if task["kind"] == "replay":
        return f"replay {task['target']}[{task['dtype']}]"
    return f"compiled {task['target']}[{task['dtype']}] {task['backend']}"


def record_type(task: dict[str, Any]) -> type[OpCaseRecord] | type[CompiledRecord] | type[GraphReplayRecord]:
    """The record a task's result is (how the parent reads a result back from the worker pipe)."""
    return {"op": OpCaseRecord, "replay": GraphReplayRecord}.get(task["kind"], CompiledRecord)


def execute_task(task: dict[str, Any], device: torch.device) -> VerifyOpsRecord:
    """Run a task in this process; problems of the code under test come back as statuses, not raises."""
    try:
        return _dispatch(task, device)
    except Exception as exc:  # anything run_case/run_compiled did not classify: record it, keep going
        return failure_result(task, "error", f"unexpected {type(exc).__name__}: {str(exc)[:300]}", None)


def _dispatch(task: dict[str, Any], device: torch.device) -> VerifyOpsRecord:
    if task["kind"] == "op":
        key = CaseKey(task["op"], task["dtype"], task["case"], task.get("case_id") or "")
        return run_case(key, load_catalog(), device)
    if task["kind"] == "compiled":
        from bringup.probes.ops.compiled.execute import run_compiled

        return run_compiled(task, device)
    if task["kind"] == "replay":
        from bringup.probes.ops.replay.execute import run_replay

        return run_replay(task, device)
    raise ValueError(f"unknown task kind {task['kind']!r}")


def failure_result(task: dict[str, Any], status: FailureStatus, message: str,
                   seconds: float | None) -> VerifyOpsRecord:
    """The record for a task whose worker crashed or timed out (no metrics: nothing came back)."""
    if task["kind"] == "op":
        return OpCaseRecord(op=task["op"], dtype=task["dtype"], case=task["case"], case_id=task.get("case_id"),
                            status=status, message=message, seconds=seconds)
    if task["kind"] == "replay":
        return GraphReplayRecord(target=task["target"], dtype=task["dtype"], status=status, message=message,
                                 seconds=seconds)
    return CompiledRecord(target=task["target"], case=task.get("case"), case_id=task.get("case_id"),
                          dtype=task["dtype"], backend=task["backend"], status=status, message=message,
                          seconds=seconds)
