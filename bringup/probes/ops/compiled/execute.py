"""Run one eager-vs-compiled comparison (in the worker or in-process) and bisect failures."""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

from bringup.probes.ops.catalog import load_catalog
from bringup.probes.ops.compiled.blocks import BLOCKS
from bringup.probes.ops.compiled.rule import judge, rmse
from bringup.probes.ops.inputs import dtype_from_name, generator, prepare_inputs
from bringup.probes.ops.judge.error_kinds import is_unsupported_error
from bringup.probes.ops.judge.metrics import flatten_outputs
from bringup.probes.ops.spec import STATISTICAL_JUDGES, CaseKey
from bringup.probes.ops.sync import synchronize
from bringup.profiles.sections.ops import CompiledRecord

LADDER: tuple[str, ...] = ("eager", "aot_eager", "aot_eager_decomp_partition")
TIMING_BUDGET_S = 0.2
TIMING_MAX_ITERS = 50


def check_backend(name: str) -> None:
    """ValueError unless torch.compile knows the backend (plugins must be imported first)."""
    from torch._dynamo.backends.registry import lookup_backend

    try:
        lookup_backend(name)
    except Exception as exc:
        known = ", ".join(sorted({*torch._dynamo.list_backends(), *LADDER}))
        raise ValueError(f"--compile-backend {name!r} is not a torch.compile backend ({type(exc).__name__}); "
                         f"known: {known}") from None


def ladder_for(backend: str) -> list[str]:
    """eager -> aot_eager -> aot_eager_decomp_partition -> backend (ending early if backend is a rung)."""
    rungs: list[str] = []
    for rung in (*LADDER, backend):
        rungs.append(rung)
        if rung == backend:
            break
    return rungs


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"[:400]


def _target(task: dict[str, Any], device: torch.device
            ) -> tuple[Callable[..., Any], Callable[..., Any], list[Any], tuple, Any]:
    """(fn, reference fn, raw inputs, keep_dtype positions, layout) for an op case or a block."""
    if task.get("case") is None:
        block = BLOCKS[task["target"]]
        raw = block.inputs(generator("block", block.name))
        if block.build is not None:
            dtype = dtype_from_name(task["dtype"])
            return block.build(dtype, device), block.build(torch.float64, torch.device("cpu")), raw, (), None
        assert block.fn is not None
        return block.fn, block.ref or block.fn, raw, (), None
    spec = load_catalog().get(task["target"])
    case = spec.find(CaseKey(task["target"], task["dtype"], task["case"], task.get("case_id") or ""))
    if case.judge in STATISTICAL_JUDGES:
        raise NotImplementedError("sampling op: judged statistically, not comparable element by element")
    return case.fn, case.ref or case.fn, case.inputs(generator(*spec.seed_parts(case))), case.keep_dtype, \
        case.layout


def _call(fn: Callable[..., Any], args: list[Any], device: torch.device) -> Any:
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = fn(*args)
        synchronize(device)
    return out


def steady_seconds(fn: Callable[..., Any], args: list[Any], device: torch.device) -> float:
    """Median seconds per call after warm-up, within a small time budget."""
    times: list[float] = []
    deadline = time.perf_counter() + TIMING_BUDGET_S
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < TIMING_MAX_ITERS):
        start = time.perf_counter()
        _call(fn, args, device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def compile_and_run(fn, backend: str, args: list[Any], device: torch.device) -> tuple[Callable[..., Any], Any, float]:
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=backend, dynamic=False)
    start = time.perf_counter()
    out = _call(compiled, args, device)
    return compiled, out, time.perf_counter() - start


def _numel(result: Any) -> int:
    return sum(t.numel() for t in flatten_outputs(result))


def run_compiled(task: dict[str, Any], device: torch.device) -> CompiledRecord:
    """Compare eager and compiled with the float64 reference into the profile record; bisect a failure."""
    started = time.perf_counter()
    record = CompiledRecord(target=task["target"], case=task.get("case"), case_id=task.get("case_id"),
                            dtype=task["dtype"], backend=task["backend"], status="error")
    try:
        fn, ref_fn, raw, keep, layout = _target(task, device)
        dev_args, ref_args = prepare_inputs(raw, dtype_from_name(task["dtype"]), device, keep, layout)
        eager_out = _call(fn, dev_args, device)
    except Exception as exc:
        record.status = "unsupported" if is_unsupported_error(exc) else "error"
        record.message = f"eager run: {_short(exc)}"
        return record
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            reference = ref_fn(*ref_args)
    except Exception as exc:
        record.message = f"float64 reference failed: {_short(exc)}"
        return record

    eager_err = rmse(eager_out, reference)
    numel = _numel(reference)
    record.eager_err = eager_err if math.isfinite(eager_err) else None
    backend = task["backend"]
    try:
        compiled, out, compile_s = compile_and_run(fn, backend, dev_args, device)
        record.compile_s = compile_s
    except Exception as exc:
        record.status, record.message = "compile_error", f"torch.compile(backend={backend!r}): {_short(exc)}"
        compiled = None
    if compiled is not None:
        verdict = judge(task["dtype"], eager_err, rmse(out, reference), numel)
        record.compiled_err = verdict.compiled_err if math.isfinite(verdict.compiled_err) else None
        record.allowed, record.k = verdict.allowed, verdict.k
        record.status = "pass" if verdict.accepted else "mismatch"
        if not verdict.accepted:
            record.message = (f"compiled RMSE {verdict.compiled_err:.3g} > {verdict.k:g} * eager RMSE "
                              f"{eager_err:.3g} + tol/10 = {verdict.allowed:.3g}")
        if task.get("timing", True):
            eager_s, compiled_s = steady_seconds(fn, dev_args, device), steady_seconds(compiled, dev_args, device)
            record.eager_s, record.compiled_s = eager_s, compiled_s
            record.speedup = eager_s / compiled_s if compiled_s > 0 else None
    if record.status != "pass" and task.get("ladder", True):
        record.ladder, record.failing_backend = bisect(fn, dev_args, reference, eager_err, numel, task, device)
    torch._dynamo.reset()
    record.seconds = time.perf_counter() - started
    return record


def bisect(fn, args: list[Any], reference: Any, eager_err: float, numel: int, task: dict[str, Any],
           device: torch.device) -> tuple[dict[str, str], str | None]:
    """Try each rung of the ladder in order; stop at the first that breaks and name it."""
    verdicts: dict[str, str] = {}
    for rung in ladder_for(task["backend"]):
        try:
            _, out, _ = compile_and_run(fn, rung, args, device)
        except Exception as exc:
            verdicts[rung] = f"compile_error: {_short(exc)[:160]}"
            return verdicts, rung
        verdict = judge(task["dtype"], eager_err, rmse(out, reference), numel)
        verdicts[rung] = ("pass" if verdict.accepted else
                          f"mismatch (RMSE {verdict.compiled_err:.3g} > {verdict.allowed:.3g})")
        if not verdict.accepted:
            return verdicts, rung
    return verdicts, None
