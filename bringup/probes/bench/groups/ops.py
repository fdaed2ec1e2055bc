"""ops: latency of each catalog op case that verify-ops passed (profile `ops`). Cases that did not
pass are skipped with the reason, or measured with a visible "unverified" mark when asked. Each timed record says
where the op ran (verify-ops' runs_on, or the op watched once where verify-ops did not decide): a figure of an op
that went through the host is the host's, plus the copies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from bringup.probes.bench.catalog_adapter import CaseResolver, catalog_case_resolver
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, short_error
from bringup.probes.ops.placement import watch_placement
from bringup.probes.ops.spec import MODEL_CASE_PREFIX
from bringup.probes.ops.sync import synchronize
from bringup.profiles.sections.bench import BenchGroup, BenchRecord
from bringup.profiles.sections.ops import HOST_FALLBACK, OpCaseRecord


def limited(cases: list[OpCaseRecord], limit: int | None, include_unverified: bool) -> set[int]:
    """ids of the cases to time: all eligible ones, or with a limit the first eligible case of each op
    (float32 first, then the catalog's order) up to `limit` cases."""
    eligible = [c for c in cases if (c.status == "pass" or include_unverified)
                and not c.case.startswith(MODEL_CASE_PREFIX)]
    if limit is None:
        return {id(c) for c in eligible}
    first: dict[str, OpCaseRecord] = {}
    for case in sorted(eligible, key=lambda c: c.dtype != "float32"):
        first.setdefault(case.op, case)
    return {id(c) for c in list(first.values())[:limit]}


def placement_of(case: OpCaseRecord, fn: Callable[[], Any], device: torch.device) -> tuple[str | None, str | None]:
    """(runs_on, evidence) from verify-ops' record, else from one watched call (nothing to decide on the host)."""
    if case.runs_on is not None:
        return case.runs_on, case.runs_on_evidence
    with watch_placement(device) as watch:
        fn()
        synchronize(device)
    return (watch.placement.runs_on, watch.placement.evidence) if watch.placement else (None, None)


def host_fallback_note(records: list[BenchRecord]) -> list[str]:
    """The group's note naming the timed ops that ran through the host."""
    timed = [r for r in records if r.status == "ok"]
    through_host = list(dict.fromkeys(r.name for r in timed if r.runs_on == HOST_FALLBACK))
    if not through_host:
        return []
    return [f"{sum(r.runs_on == HOST_FALLBACK for r in timed)} of {len(timed)} timed cases ran through the host "
            f"(a CPU fallback: the figure is the host's, plus the copies): {', '.join(through_host)}"]


def run(ctx: BenchContext, resolver: CaseResolver | None = None) -> BenchGroup:
    cases = list(ctx.profile.ops) if ctx.profile is not None else []
    if not cases:
        return BenchGroup(status="skipped", reason="no verify-ops results in the profile; run "
                          "`bringup verify-ops` first")
    if resolver is None:
        resolver, why = catalog_case_resolver()
        if resolver is None:
            return BenchGroup(status="skipped", reason=why)
    records: list[BenchRecord] = []
    chosen = limited(cases, ctx.preset.ops_limit, ctx.include_unverified)
    for case in cases:
        key = f"{case.op} {case.dtype} {case.case}"
        params = {"op": case.op, "case": case.case, "verify_ops_status": case.status}
        verified = case.status == "pass"
        if case.case.startswith(MODEL_CASE_PREFIX):
            records.append(not_measured(key, case.op, "skipped", "a case at one model's shapes (verify-ops --model); "
                                        "bench times the catalog's own cases", dtype=case.dtype, params=params))
            continue
        if id(case) not in chosen and (verified or ctx.include_unverified):
            records.append(not_measured(key, case.op, "skipped", f"the {ctx.preset.name} preset times one case "
                                        f"per op, at most {ctx.preset.ops_limit}; run the full preset for all",
                                        dtype=case.dtype, params=params))
            continue
        if not verified and not ctx.include_unverified:
            records.append(not_measured(key, case.op, "skipped", f"verify-ops status {case.status} (not pass); "
                                        "use --include-unverified to time it anyway", dtype=case.dtype,
                                        params=params))
            continue
        ctx.on_step(f"ops {key}")
        try:
            fn = resolver(case.op, case.dtype, case.case, ctx.device)
            runs_on, evidence = placement_of(case, fn, ctx.device)
            timing = ctx.harness.measure(fn)
        except Exception as exc:
            records.append(not_measured(key, case.op, "error", short_error(exc), dtype=case.dtype, params=params))
            continue
        records.append(measured(key, case.op, timing, dtype=case.dtype, params=params, verified=verified,
                                runs_on=runs_on, runs_on_evidence=evidence))
    status = "measured" if any(r.status == "ok" for r in records) else "skipped"
    return BenchGroup(status=status, reason=None if status == "measured" else "no case passed verify-ops",
                      notes=host_fallback_note(records), records=records)
