"""Eager against graph replay for one block and dtype: capture with the device's graph API, replay at least twice
with new values copied into the static inputs, judge each replay against float64 by the compiled rule, bisect a
failure to its first op; a capture the device refuses is recorded with the device's own error."""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import torch

from bringup.backends.registry import backend_for
from bringup.errors import exception_line
from bringup.probes.ops.compiled.rule import judge, rmse
from bringup.probes.ops.inputs import dtype_from_name, prepare_inputs
from bringup.probes.ops.judge.metrics import flatten_outputs
from bringup.probes.ops.replay.first_op import first_bad_op
from bringup.probes.ops.replay.targets import replay_target
from bringup.probes.ops.sync import synchronize
from bringup.profiles.sections.graph_replay import GraphReplayRecord

REPLAYS = 2


def _run(fn: Any, args: list[Any]) -> Any:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def _host_copy(result: Any) -> list[torch.Tensor]:
    return [t.detach().to("cpu") for t in flatten_outputs(result)]


def run_replay(task: dict[str, Any], device: torch.device) -> GraphReplayRecord:
    started = time.perf_counter()
    backend = backend_for(device)
    record = GraphReplayRecord(target=task["target"], dtype=task["dtype"], api=backend.graph_api(), status="error")
    if record.api is None:
        record.status, record.message = "skipped", f"the {device.type} backend offers no graph-capture API"
        return record
    try:
        _compare(record, device)
    finally:
        record.seconds = time.perf_counter() - started
    return record


def _compare(record: GraphReplayRecord, device: torch.device) -> None:
    dtype = dtype_from_name(record.dtype)
    try:
        target = replay_target(record.target, record.dtype, device)
        static, _ = prepare_inputs(target.inputs(0), dtype, device)
    except Exception as exc:
        record.message = f"building the block: {exception_line(exc, 400)}"
        return
    held: dict[str, Any] = {}

    def step() -> None:
        held["out"] = target.fn(*static)

    def capture(body: Any) -> Any:
        return backend.capture_graph(device, body)

    backend = backend_for(device)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            replay = capture(step)
    except Exception as exc:
        record.status, record.message = "capture_unsupported", f"capture failed: {exception_line(exc, 400)}"
        return
    if replay is None:
        record.status, record.message = "skipped", f"bringup has no executed capture for {record.api}"
        return
    worst = None
    for n in range(1, REPLAYS + 1):
        verdict = _one_replay(record, target, static, held, replay, n, device)
        if verdict is None:
            return
        if worst is None or verdict[1] - verdict[2] > worst[1] - worst[2]:
            worst = verdict
    assert worst is not None
    eager_err, replay_err, allowed, k = worst
    record.replays = REPLAYS
    record.eager_err = eager_err if math.isfinite(eager_err) else None
    record.replay_err = replay_err if math.isfinite(replay_err) else None
    record.allowed, record.k = allowed, k
    record.status = "pass" if replay_err <= allowed else "mismatch"
    if record.status == "mismatch":
        op, where = first_bad_op(capture, target.fn, static, record.dtype, device)
        record.first_bad_op = op
        record.message = (f"wrong under graph replay: replay RMSE {replay_err:.3g} > {k:g} * eager RMSE "
                          f"{eager_err:.3g} + tol/10 = {allowed:.3g}; first op off under replay: "
                          f"{op or 'none found'} ({where})")


def _one_replay(record: GraphReplayRecord, target: Any, static: list[Any], held: dict[str, Any], replay: Any,
                n: int, device: torch.device) -> tuple[float, float, float, float] | None:
    """(eager_err, replay_err, allowed, k) of replay n with its new inputs; None (record filled) when it failed."""
    dtype = dtype_from_name(record.dtype)
    fresh, reference_args = prepare_inputs(target.inputs(n), dtype, device)
    for slot, value in zip(static, fresh):
        if isinstance(slot, torch.Tensor):
            slot.copy_(value)
    try:
        replay()
        synchronize(device)
        replayed = _host_copy(held["out"])
    except Exception as exc:
        record.status, record.message = "capture_unsupported", f"replay {n} failed: {exception_line(exc, 400)}"
        return None
    try:
        eager = _host_copy(_run(target.fn, fresh))
        reference = _run(target.ref, reference_args)
    except Exception as exc:
        record.message = f"eager run or float64 reference of replay {n}: {exception_line(exc, 400)}"
        return None
    eager_err, replay_err = rmse(eager, reference), rmse(replayed, reference)
    numel = sum(t.numel() for t in flatten_outputs(reference))
    verdict = judge(record.dtype, eager_err, replay_err, numel)
    return eager_err, replay_err, verdict.allowed, verdict.k
