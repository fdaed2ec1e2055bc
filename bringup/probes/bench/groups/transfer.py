"""transfer: host->device and device->host copies, pinned and pageable host memory."""

from __future__ import annotations

import torch

from bringup.backends.host import is_host
from bringup.probes.bench.accounting import transfer_work
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, short_error
from bringup.profiles.sections.bench import BenchGroup, BenchRecord


def pinned_unavailable_reason(ctx: BenchContext) -> str | None:
    """Why pinned host memory is not measured, or None when it can be."""
    features = ctx.capability_names("features")
    if features is not None and features.get("pinned_memory") not in (None, "supported"):
        return f"the profile marks pinned_memory {features['pinned_memory']}"
    try:
        pin(torch.empty(16, dtype=torch.uint8), ctx.device)
    except Exception as exc:
        return f"pin_memory failed: {short_error(exc)}"
    return None


def pin(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Page-locked copy for the current accelerator (torch picks it; CUDA also covers ROCm)."""
    pinned = tensor.pin_memory()
    if not pinned.is_pinned():
        raise RuntimeError(f"pin_memory() did not pin host memory for {device}")
    return pinned


def run(ctx: BenchContext) -> BenchGroup:
    if is_host(ctx.device):
        reason = "not applicable on the CPU: host and device memory are the same memory, nothing is transferred"
        records = [not_measured(f"{d} {m}", d, "not_applicable", reason)
                   for d in ("h2d", "d2h") for m in ("pinned", "pageable")]
        return BenchGroup(status="not_applicable", reason=reason, records=records)
    records: list[BenchRecord] = []
    pinned_reason = pinned_unavailable_reason(ctx)
    budget = ctx.memory_budget_bytes()
    for mib in ctx.preset.transfer_mib:
        nbytes = mib * 2**20
        params = {"bytes": nbytes}
        for memory in ("pageable", "pinned"):
            for direction in ("h2d", "d2h"):
                key = f"{direction} {memory} {mib} MiB"
                if memory == "pinned" and pinned_reason:
                    records.append(not_measured(key, direction, "skipped", pinned_reason, params=params))
                    continue
                if budget is not None and nbytes > budget:
                    records.append(not_measured(key, direction, "skipped", "over the memory budget", params=params))
                    continue
                ctx.on_step(f"transfer {key}")
                try:
                    host = torch.empty(nbytes, dtype=torch.uint8)
                    host = pin(host, ctx.device) if memory == "pinned" else host
                    dev = torch.empty(nbytes, dtype=torch.uint8, device=ctx.device)
                    blocking = memory == "pageable"
                    if direction == "h2d":
                        timing = ctx.harness.measure(lambda d=dev, h=host, nb=not blocking: d.copy_(h, non_blocking=nb))
                    else:
                        timing = ctx.harness.measure(lambda d=dev, h=host, nb=not blocking: h.copy_(d, non_blocking=nb))
                except Exception as exc:
                    records.append(not_measured(key, direction, "error", short_error(exc), params=params))
                    continue
                records.append(measured(key, direction, timing, transfer_work(nbytes),
                                        params={**params, "host_memory": memory}))
    return BenchGroup(status="measured", records=records)
