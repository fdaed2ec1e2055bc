"""The fleet's bench: two figures per rank -- float32 matmul 512^3 GFLOP/s and the triad memory bandwidth.
Matmul shows a slow or throttled compute unit, triad a slow memory system.

It reuses the bench stage's harness and groups (same records, written into the rank's profile like
`bringup bench --quick` would), with one square size and no LLM shapes so a rank measures in about a second.
The ranks of a host take turns (stages.run_bench): while one measures the others wait in a barrier, so on a
host whose ranks share the cores (4 CPU ranks on 2 cores) or its memory and power no rank's figure is another
rank's contention -- the fleet compares devices, not who happened to run at the same time. Hosts measure at
the same time (contention is a host's own), so a fleet's bench takes as many turns as a host has ranks.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from bringup.backends.base import DeviceInfo
from bringup.probes.bench.accounting import STREAM_ARRAYS, stream_work
from bringup.probes.bench.cache import llc_size
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.groups import bandwidth, matmul
from bringup.probes.bench.harness import Harness, HarnessSettings
from bringup.probes.bench.presets import QUICK
from bringup.probes.bench.records import measured, short_error
from bringup.probes.bench.roofline import apply_roofline
from bringup.probes.bench.sizing import RateTracker
from bringup.profiles.sections.bench import BenchGroup, BenchSection, HarnessSettingsModel
from bringup.profiles.store import now_iso, update_profile

MATMUL_N = 512
# Many repetitions and no early stop: the fleet's figure is the fastest repetition (summary.py), and other
# processes on the host only ever slow a repetition down, so the best of 25+ is the device's own speed.
SETTINGS = HarnessSettings(warmup=2, min_reps=25, max_reps=200, rel_iqr_threshold=0.0, budget_s=0.4,
                           min_rep_s=2e-3)
FLEET_PRESET = replace(QUICK, settings=SETTINGS, square_sizes=(MATMUL_N,), llm_m=())
NOTE = f"fleet quick bench: float32 square {MATMUL_N} only, measured while the other ranks waited"


def measure(device: torch.device, info: DeviceInfo) -> dict[str, BenchGroup]:
    """The matmul and bandwidth groups of this rank."""
    settings = FLEET_PRESET.settings
    ctx = BenchContext(device=device, info=info, harness=Harness.for_device(device, settings), preset=FLEET_PRESET,
                       profile=None, llc=llc_size(device, info.extra))
    model = HarnessSettingsModel(**settings.to_dict())
    groups: dict[str, BenchGroup] = {}
    with torch.no_grad():
        params = {"kind": "square", "m": MATMUL_N, "k": MATMUL_N, "n": MATMUL_N}
        records = matmul.measure_one(ctx, "float32", f"square {MATMUL_N}", MATMUL_N, MATMUL_N, MATMUL_N, params,
                                     RateTracker())
        ok = any(r.status == "ok" for r in records)
        groups["matmul"] = BenchGroup(status="measured" if ok else "skipped", reason=None if ok else
                                      records[0].reason, notes=[NOTE], records=records)
        groups["bandwidth"] = triad(ctx)
    for group in groups.values():
        group.preset, group.settings, group.finished = "quick", model, now_iso()
    return groups


def triad(ctx: BenchContext) -> BenchGroup:
    """The bandwidth group's triad alone (a = b + s x c over arrays several times the last-level cache)."""
    notes = [NOTE]
    n = bandwidth.array_elements(ctx, notes)
    params = {"elements": n, "array_bytes": n * bandwidth.DTYPE.itemsize, "arrays_touched": STREAM_ARRAYS["triad"]}
    try:
        arrays = [torch.full((n,), value, dtype=bandwidth.DTYPE, device=ctx.device) for value in (0.1, 0.2, 0.0)]
        timing = ctx.harness.measure(bandwidth.kernels(*arrays)["triad"])
    except Exception as exc:  # out of memory, or no float32 on the device
        return BenchGroup(status="skipped", reason=f"triad failed: {short_error(exc)}", notes=notes)
    work = stream_work("triad", n, bandwidth.DTYPE.itemsize)
    return BenchGroup(status="measured", notes=notes,
                      records=[measured("triad float32", "triad", timing, work, dtype="float32", params=params)])


def _best_s(group: BenchGroup) -> float:
    times = [r.min_s for r in group.records if r.status == "ok" and r.min_s]
    return min(times) if times else float("inf")


def better(kept: dict[str, BenchGroup], new: dict[str, BenchGroup]) -> dict[str, BenchGroup]:
    """Per group, the round with the fastest repetition (the same work each round)."""
    return {name: group if name not in kept or _best_s(group) < _best_s(kept[name]) else kept[name]
            for name, group in new.items()}


def merged(previous: BenchSection | None, groups: dict[str, BenchGroup], device_name: str) -> BenchSection:
    """What bench.stage.merge does (imported alone: that module pulls in every group, the runner's too)."""
    section = BenchSection(groups={**(previous.groups if previous else {}), **groups})
    apply_roofline(section, device_name)
    return section


def record(profile_path: Path, info: DeviceInfo, groups: dict[str, BenchGroup], started: str) -> None:
    update_profile(profile_path, info, lambda p: setattr(p, "bench", merged(p.bench, groups, info.name)),
                   stage="bench", status="complete", started=started)
