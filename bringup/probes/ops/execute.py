"""Run one op case in this process: inputs, device call, float64 reference, judgement, guard regions."""

from __future__ import annotations

import os
import time
import traceback
import warnings
from typing import Any

import torch

from bringup.probes.ops.guard import guarded_output
from bringup.probes.ops.inputs import changed_inputs, dtype_from_name, generator, prepare_inputs, snapshot
from bringup.probes.ops.judge.arithmetic import Arithmetic, dim_of
from bringup.probes.ops.judge.decide import judge_tensor
from bringup.probes.ops.judge.error_kinds import is_unsupported_error
from bringup.probes.ops.judge.metrics import Comparison, flatten_outputs, merge, rms
from bringup.probes.ops.judge.statistics import judge_multinomial
from bringup.probes.ops.judge.tolerances import Tolerance, exact, tolerance_for
from bringup.probes.ops.placement import PlacementWatch, watch_placement
from bringup.probes.ops.spec import STATISTICAL_JUDGES, CaseKey, CaseSpec, Catalog
from bringup.probes.ops.sync import synchronize
from bringup.profiles.sections.ops import OpCaseRecord

TRACE_ENV = "BRINGUP_OPS_TRACE"  # a file path: every case executed is appended (tests prove "no case twice")


def _trace(key: CaseKey) -> None:
    path = os.environ.get(TRACE_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"{key.op}\t{key.dtype}\t{key.case}\n")
            fh.flush()


def _short(exc: BaseException, limit: int = 400) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    first = " ".join(line.strip() for line in text[:3])
    return first[:limit]


def _tolerance_for_output(case: CaseSpec, out: torch.Tensor, ref: torch.Tensor) -> Tolerance:
    if case.judge == "exact" or not out.is_floating_point():
        return exact()
    judged_as = case.accumulator or str(out.dtype).removeprefix("torch.")
    tol = tolerance_for(judged_as, case.accum, rms(ref), case.step_rounding)
    if case.accumulator:
        return Tolerance(tol.rtol, tol.atol, f"{case.accumulator_reason}; {tol.reason}")
    return tol


def judge_outputs(case: CaseSpec, result: Any, reference: Any,
                  arith: Arithmetic | None = None) -> tuple[Comparison, Tolerance | None]:
    """Each output by the error bound of the op's arithmetic (`arith`; the tolerance table for an op without a
    rule, or a tuple result) and the bias test; exact results exactly."""
    outs, refs = flatten_outputs(result), flatten_outputs(reference)
    if len(outs) != len(refs):
        return Comparison(False, problems=[f"{len(outs)} outputs, reference has {len(refs)}"]), None
    parts, tols = [], []
    for out, ref in zip(outs, refs):
        tol = _tolerance_for_output(case, out, ref)
        tols.append(tol)
        parts.append(judge_tensor(out, ref, tol, arith if len(outs) == 1 else None))
    worst_tol = max(tols, key=lambda t: (t.rtol, t.atol))
    return merge(parts), worst_tol


def _judge_multinomial(result: Any, probs: Any, case: CaseSpec) -> tuple[Comparison, str]:
    """Statistical verdict on draws from probs (float64); no elementwise metrics, the chi-square figures go into
    the message."""
    replacement = dict(case.params).get("replacement", True)
    verdict = judge_multinomial(result, probs, replacement)
    comp = Comparison(verdict.passed, problems=verdict.problems)
    if not replacement:
        return comp, "draws valid: distinct categories, none with probability 0"
    return comp, f"chi-square {verdict.statistic:.1f} vs critical {verdict.critical:.1f} (alpha=1e-6)"


def _record_placement(record: OpCaseRecord, watch: PlacementWatch | None) -> None:
    """Where the op ran, from what it dispatched (nothing is decided on the host itself)."""
    if watch is not None and watch.placement is not None:
        record.runs_on, record.runs_on_evidence = watch.placement.runs_on, watch.placement.evidence


class _Ended(Exception):
    """The case ended before its verdict; its record says why."""


def run_case(key: CaseKey, catalog: Catalog, device: torch.device) -> OpCaseRecord:
    """Execute one case and judge it into its profile record; never raises for problems of the op under test."""
    _trace(key)
    spec = catalog.get(key.op)
    case = spec.find(key)
    record = OpCaseRecord(op=key.op, dtype=key.dtype, case=case.label, case_id=case.case_id, status="error")
    try:
        dev_args, ref_args = _inputs(record, case, spec.seed_parts(case), device)
        before = snapshot(dev_args)
        result = _call_on_device(record, case, dev_args, device)
        reference = _reference(record, case, ref_args)
    except _Ended:
        return record
    _judge(record, case, (result, reference), ref_args, changed_inputs(dev_args, before), dev_args)
    return record


def _inputs(record: OpCaseRecord, case: CaseSpec, seed_parts: tuple[str, ...], device: torch.device
            ) -> tuple[list[Any], list[Any]]:
    """(device arguments, float64 reference arguments) from the case's seeded inputs."""
    try:
        dtype = dtype_from_name(record.dtype)
    except ValueError as exc:
        record.status, record.message = "unsupported", f"this torch has no dtype: {exc}"
        raise _Ended from None
    try:
        raw = case.inputs(generator(*seed_parts))
    except Exception as exc:
        record.message = f"building the inputs failed (a catalog bug): {_short(exc)}"
        raise _Ended from None
    try:
        return prepare_inputs(raw, dtype, device, case.keep_dtype, case.layout)
    except Exception as exc:  # casting to the dtype or moving it to the device: the dtype is rejected
        record.status = "unsupported"
        record.message = f"{record.dtype} inputs on {device} rejected: {_short(exc)}"
        raise _Ended from None


def _call_on_device(record: OpCaseRecord, case: CaseSpec, dev_args: list[Any], device: torch.device) -> Any:
    """The op's result on the device, timed, with where it ran; a raising op ends the case with its error."""
    torch.manual_seed(1234)
    caught: list[warnings.WarningMessage] = []
    watch: PlacementWatch | None = None
    try:
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught, watch_placement(device) as watch:
            warnings.simplefilter("always")
            start = time.perf_counter()
            result = case.fn(*dev_args)
            synchronize(device)
            record.seconds = time.perf_counter() - start
    except Exception as exc:
        _record_placement(record, watch)  # a raising op's error may have come from the host's kernel
        record.status = "unsupported" if is_unsupported_error(exc) else "error"
        notes = "; ".join(str(w.message).splitlines()[0] for w in caught[:3])
        record.message = _short(exc) + (f" (warnings: {notes})" if notes else "")
        if record.status == "error" and exc.__traceback__ is not None:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            record.message += f" (at {os.path.basename(frame.filename)}:{frame.lineno} in {frame.name})"
        raise _Ended from None
    _record_placement(record, watch)
    return result


def _reference(record: OpCaseRecord, case: CaseSpec, ref_args: list[Any]) -> Any:
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return (case.ref or case.fn)(*ref_args)
    except Exception as exc:
        record.status, record.message = "error", f"float64 reference failed: {_short(exc)}"
        raise _Ended from None


def _judge(record: OpCaseRecord, case: CaseSpec, outputs: tuple[Any, Any], ref_args: list[Any],
           changed: list[int], dev_args: list[Any]) -> None:
    """The verdict and its figures: the result against the reference, inputs untouched, the out= variant's guards."""
    result, reference = outputs
    comp, tol, note = _judged(record.op, case, result, reference, ref_args, dev_args)
    problems = list(comp.problems)
    if changed:
        problems.append(f"modified its input argument(s) {changed}")
    _fill(record, comp, tol, problems, note)


def _fill(record: OpCaseRecord, comp: Comparison, tol: Tolerance | None, problems: list[str], note: str | None
          ) -> None:
    """The judgement into the record: errors, what was allowed, the bias, the status and message."""
    record.max_abs, record.max_rel, record.nmse = comp.max_abs, comp.max_rel, comp.nmse
    record.worst_index, record.worst_output = comp.worst_index, comp.worst_output
    if tol is not None and comp.decided_by in ("tolerance", "tolerance and bias"):
        record.rtol, record.atol = tol.rtol, tol.atol
    record.bound, record.bound_ratio, record.decided_by = comp.bound, comp.bound_ratio, comp.decided_by
    record.bias, record.bias_z = comp.bias, comp.bias_z
    record.status = "pass" if comp.passed and not problems else "fail"
    if problems or note:
        record.message = "; ".join([*problems, *([note] if note else [])])[:600]


def _judged(op: str, case: CaseSpec, result: Any, reference: Any, ref_args: list[Any], dev_args: list[Any]
            ) -> tuple[Comparison, Tolerance | None, str | None]:
    """The result judged (statistically for a sampling op, else by bound and bias), its out= form too."""
    if case.judge in STATISTICAL_JUDGES:
        probs = reference if case.judge == "sampler" else ref_args[0]
        (comp, note), tol = _judge_multinomial(result, probs, case), None
        comp.decided_by = "chi-square"
        return comp, tol, note
    arith = Arithmetic(op, case.ref or case.fn, ref_args, dim_of(case.params))
    comp, tol = judge_outputs(case, result, reference, arith)
    if case.out is not None and isinstance(result, torch.Tensor):
        comp.problems.extend(_guard_check(case, dev_args, result, reference, tol, arith))
    return comp, tol, None


def _guard_check(case: CaseSpec, dev_args: list[Any], result: torch.Tensor, reference: Any,
                 tol: Tolerance | None, arith: Arithmetic | None = None) -> list[str]:
    """Run the out= variant into a sentinel-guarded view; report touched guards and a wrong result."""
    guarded = guarded_output(result.shape, result.dtype, result.device)
    try:
        with torch.no_grad():
            case.out(*dev_args, out=guarded.view)
            synchronize(result.device)
    except Exception as exc:
        if is_unsupported_error(exc):
            return []  # the out= form is optional; the functional form was verified above
        return [f"out= variant raised {_short(exc, 200)}"]
    problems = []
    touched = guarded.touched()
    if touched:
        problems.append(f"out= wrote outside its output (guard region {', '.join(touched)} overwritten)")
    comp, _ = judge_outputs(case, guarded.view, reference, arith)
    if not comp.passed:
        problems.extend(f"out= result: {p}" for p in comp.problems)
    return problems
