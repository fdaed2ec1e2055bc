"""Turn what the ranks reported into the profile's `collectives` section.

Per case: the wrong-element counts of all ranks are summed (each rank checks its own output, like
nccl-tests' #wrong), the time is the slowest rank's median (a collective is done when its last rank
is), and algbw/busbw follow nccl-tests. Faults are reduced to one per rank, the most telling first:
a rank that exited beats one that was named by the monitored barrier, which beats the errors that
healthy ranks saw as a consequence.
"""

from __future__ import annotations

from typing import Any

import torch

from bringup.fallbacks import FallbackEvent
from bringup.probes.collectives.backend_choice import BackendChoice
from bringup.probes.collectives.bandwidth import algbw_gbps, bus_factor, busbw_gbps
from bringup.probes.collectives.ops import element_count
from bringup.probes.collectives.patterns import SUPPORTED_DTYPES
from bringup.probes.collectives.plan import CaseSpec, Plan
from bringup.probes.collectives.ranks.launcher import Fault, LaunchOutcome
from bringup.profiles.sections.collectives import (
    CollectiveCaseRecord,
    CollectiveFallback,
    CollectiveFault,
    CollectivesSection,
)

_PRIORITY = {"exited": 0, "hung": 1, "startup": 2, "interrupted": 3, "error": 4}
_CULPRIT_KINDS = {"exited", "hung", "startup"}


def consolidate_faults(faults: list[Fault]) -> list[CollectiveFault]:
    """One fault per rank (its most telling one); errors on other ranks are marked as consequences."""
    by_rank: dict[int | None, list[Fault]] = {}
    for fault in faults:
        by_rank.setdefault(fault.rank, []).append(fault)
    primaries = []
    for rank, group in by_rank.items():
        group.sort(key=lambda f: _PRIORITY.get(f.kind, 9))
        primary = group[0]
        detail = primary.detail
        if primary.kind == "exited" and any(f.kind == "hung" for f in group):
            detail += "; gloo's monitored barrier also named it"
        primaries.append(CollectiveFault(rank=rank, kind=primary.kind, detail=detail))
    have_culprits = any(f.kind in _CULPRIT_KINDS for f in primaries)
    for fault in primaries:
        fault.culprit = fault.kind in _CULPRIT_KINDS or not have_culprits
    primaries.sort(key=lambda f: (not f.culprit, _PRIORITY.get(f.kind, 9), -1 if f.rank is None else f.rank))
    return primaries


def _case_record(case: CaseSpec, reports: list[dict[str, Any]], world_size: int, expected_reports: int,
                 status_if_missing: str) -> CollectiveCaseRecord:
    first = reports[0] if reports else {}
    dtype = SUPPORTED_DTYPES.get(case.dtype, torch.float32)
    count = int(first.get("count", element_count(case.op, case.size_bytes, dtype.itemsize, world_size)))
    record = CollectiveCaseRecord(op=case.op, dtype=case.dtype, size_bytes=count * dtype.itemsize, count=count,
                                  status="pass", ranks=len(reports))
    errors = [r for r in reports if r["status"] == "error"]
    statuses = {r["status"] for r in reports}
    if len(reports) < expected_reports:
        record.status = status_if_missing  # type: ignore[assignment]
        record.error = f"{expected_reports - len(reports)} of {expected_reports} ranks did not finish this case"
        record.wrong = sum(int(r.get("wrong") or 0) for r in reports) if reports else None
        return record
    elif errors:
        record.status, record.error = "error", f"rank {errors[0]['rank']}: {errors[0].get('error')}"
    elif statuses <= {"skipped", "unsupported"}:
        record.status, record.error = first["status"], first.get("error")
    if record.status in ("error", "skipped", "unsupported"):
        return record
    record.wrong = sum(int(r.get("wrong") or 0) for r in reports)
    if record.status == "pass" and record.wrong:
        record.status = "fail"
    times = [r["median_s"] for r in reports if r.get("median_s") is not None]
    if times and len(reports) == expected_reports:
        seconds = max(times)
        record.time_us = seconds * 1e6
        record.iters = min(int(r.get("iters") or 0) for r in reports)
        record.algbw_gbps = algbw_gbps(record.size_bytes, seconds)
        record.busbw_gbps = busbw_gbps(case.op, world_size, record.size_bytes, seconds)
        record.bus_factor = bus_factor(case.op, world_size)
    return record


def case_records(plan: Plan, outcome: LaunchOutcome, faults: list[CollectiveFault]) -> list[CollectiveCaseRecord]:
    """Records for every case some rank reached; the case a fault interrupted is crashed or timeout.
    Completeness is judged against the ranks whose reports we hold (all of them, except after a failure
    under torchrun, where each rank only has its own)."""
    missing_status = "timeout" if any(f.kind == "hung" for f in faults) else "crashed"
    reached = max(outcome.arrived.values(), default=-1)
    records = []
    for case in plan.cases():
        reports = [outcome.results[r][case.index] for r in sorted(outcome.results)
                   if case.index in outcome.results[r]]
        if not reports and case.index > reached:
            continue
        records.append(_case_record(case, reports, outcome.world_size, len(outcome.results), missing_status))
    return records


def rank_devices(outcome: LaunchOutcome) -> list[str]:
    """Each rank's device as the rank reported it when it joined ('?' for a rank that never did)."""
    return [str((outcome.ready.get(rank) or {}).get("device", "?")) for rank in range(outcome.world_size)]


def build_section(plan: Plan, outcome: LaunchOutcome, choice: BackendChoice, launch: str,
                  nnodes: int = 1, fallbacks: list[FallbackEvent] | None = None) -> CollectivesSection:
    faults = consolidate_faults(outcome.faults)
    cases = case_records(plan, outcome, faults)
    planned = len(plan.cases())
    ok = not faults and len(cases) == planned and all(c.status in ("pass", "skipped", "unsupported") for c in cases)
    return CollectivesSection(
        status="pass" if ok else "fail", world_size=outcome.world_size, nnodes=nnodes, launch=launch,
        backend=choice.name, backend_reason=choice.reason, device_type=plan.device_type,
        data_path=choice.data_path, rank_devices=rank_devices(outcome),
        fallbacks=[CollectiveFallback(level=e.level, what=e.what, wanted=e.wanted, instead=e.instead, why=e.why)
                   for e in fallbacks or []],
        dtypes=list(plan.dtypes), timeout_s=plan.timeout_s, seconds=round(outcome.seconds, 3),
        cases_planned=planned, cases=cases, faults=faults,
        detected_after_s=None if outcome.detected_after_s is None else round(outcome.detected_after_s, 3),
    )
