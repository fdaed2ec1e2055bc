"""dispatch latency: the wall time per call of a tiny op (the framework + launch floor)."""

from __future__ import annotations

import torch

from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, short_error
from bringup.profiles.sections.bench import BenchGroup


def run(ctx: BenchContext) -> BenchGroup:
    x = torch.zeros(1, device=ctx.device)
    sync = ctx.harness.sync

    def launch_and_wait() -> None:
        x.add_(1.0)
        sync()

    cases = {
        "tiny_op": (lambda: x.add_(1.0), "add_ on a 1-element tensor, calls back to back (dispatch throughput floor)"),
        "tiny_op_synced": (launch_and_wait, "add_ then synchronize each call (launch + completion round trip)"),
        "sync_only": (sync, "synchronize with nothing queued (the synchronisation floor)"),
    }
    records = []
    for name, (fn, what) in cases.items():
        ctx.on_step(f"dispatch {name}")
        try:
            timing = ctx.harness.measure(fn)
        except Exception as exc:
            records.append(not_measured(name, name, "error", short_error(exc)))
            continue
        records.append(measured(name, name, timing, dtype="float32", params={"what": what}))
    return BenchGroup(status="measured", records=records)
