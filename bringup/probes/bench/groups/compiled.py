"""eager vs compiled: for each target the compiled check accepted (profile `compiled`, status pass:
composite blocks and op cases), time eager and torch.compile with the same backend side by side; the
compiled record carries the speedup (eager time / compiled time)."""

from __future__ import annotations

import time

import torch

from bringup.probes.bench.catalog_adapter import BlockResolver, compiled_block_resolver
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, set_speedup, short_error
from bringup.profiles.sections.bench import BenchGroup, BenchRecord


def measure_block(ctx: BenchContext, resolver: BlockResolver, target: str, label: str | None, dtype: str,
                  backend: str) -> list[BenchRecord]:
    base = f"{target} {label} {dtype}" if label else f"{target} {dtype}"
    params = {"target": target, "case": label, "backend": backend}
    try:
        fn, args = resolver(target, label, dtype, ctx.device)
        ctx.on_step(f"compiled {base} eager")
        eager = measured(f"{base} eager", target, ctx.harness.measure(lambda: fn(*args)), dtype=dtype,
                         params={**params, "mode": "eager"})
    except Exception as exc:
        return [not_measured(f"{base} eager", target, "error", short_error(exc), dtype=dtype, params=params)]
    ctx.on_step(f"compiled {base} {backend}")
    try:
        compiled_fn = torch.compile(fn, backend=backend)
        start = time.perf_counter()
        compiled_fn(*args)  # compile outside the timed region
        ctx.harness.sync()
        compile_s = time.perf_counter() - start
        timing = ctx.harness.measure(lambda: compiled_fn(*args))
    except Exception as exc:
        return [eager, not_measured(f"{base} {backend}", target, "error", short_error(exc), dtype=dtype,
                                    params={**params, "mode": "compiled"})]
    compiled = measured(f"{base} {backend}", target, timing, dtype=dtype,
                        params={**params, "mode": "compiled", "compile_s": round(compile_s, 3)})
    set_speedup(compiled, eager)
    return [eager, compiled]


def run(ctx: BenchContext, resolver: BlockResolver | None = None) -> BenchGroup:
    checks = list(ctx.profile.compiled) if ctx.profile is not None else []
    if not checks:
        return BenchGroup(status="skipped", reason="no compiled-check results in the profile; run "
                          "`bringup verify-ops --compiled` first")
    if resolver is None:
        resolver, why = compiled_block_resolver()
        if resolver is None:
            return BenchGroup(status="skipped", reason=why)
    records: list[BenchRecord] = []
    for check in checks:
        label = getattr(check, "case", None)
        if check.status != "pass":
            name = f"{check.target} {label} {check.dtype}" if label else f"{check.target} {check.dtype}"
            records.append(not_measured(f"{name} {check.backend}", check.target, "skipped",
                                        f"the compiled check did not accept it (status {check.status})",
                                        dtype=check.dtype))
            continue
        records.extend(measure_block(ctx, resolver, check.target, label, check.dtype, check.backend))
    status = "measured" if any(r.status == "ok" for r in records) else "skipped"
    return BenchGroup(status=status, reason=None if status == "measured" else "no block was accepted",
                      records=records)
