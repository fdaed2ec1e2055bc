"""The served model's plan as `bringup tune` recorded it, and its reuse at start-up.

A record holds the timings tune combined (profile section `models`, keyed by the model's name and a hash of its
files: sources/identity.py, and the --quantization; the dtype and the torch it was tuned under are checked here).
Start-up on a recorded model replays them — the same choices from the same numbers — after the checks that the
chosen kernels still compute right here, and times nothing. A record tuned at another dtype or torch is not used:
its timings say nothing about this one; one that breaks the bounds replay needs (record/bounds.py) is refused.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from bringup.profiles.schema import Profile
from bringup.profiles.sections.models import PLAN_VALUES_AS_DATA, CandidateRecord, ModelPlanRecord, RecordedChoice
from bringup.runner.model.config import ModelConfig
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.host_kernels import paged_decode_why_not, panels_why_not
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.plan import SETTING_NAMES, Choice, ExecutionPlan
from bringup.runner.plan.record.late_timings import recorded_fields, replayed_fields
from bringup.runner.plan.settings import MEASURED_SETTINGS  # the others: the profile, the caller or memory decide
from bringup.runner.weights.kinds import PACKED, PANELS
from bringup.runner.weights.registry import packed_check

KEY_HASH_CHARS = 8


def model_key(name: str, fingerprint: str, quantization: str = "none") -> str:
    """`name [hash]` (`fingerprint`: the model's files' sha256, ModelSource.fingerprint), and the --quantization when
    one was asked (`name [hash] int8`): another checkpoint under the same name, other weights of the same size, or
    the same one quantized, get their own record; a re-tune replaces its own."""
    key = f"{name} [{fingerprint[:KEY_HASH_CHARS]}]"
    return key if quantization == "none" else f"{key} {quantization}"


def find_record(profile: Profile | None, key: str, dtype: str, quantization: str = "none"
                ) -> tuple[ModelPlanRecord | None, str]:
    """The record for `key` at `dtype` and `quantization` (as asked), or None and why not (a sentence for the
    log): timings of other weights decide nothing for these."""
    record = (profile.models or {}).get(key) if profile is not None else None
    if record is None:
        return None, f"no plan recorded for {key} on this device (bringup tune records one)"
    if record.dtype != dtype:
        return None, f"the plan recorded for {key} was tuned at {record.dtype}, not {dtype}: timing at start-up"
    if record.quantization != quantization:
        return None, (f"the plan recorded for {key} was tuned with --quantization {record.quantization}, not "
                      f"{quantization}: timing at start-up")
    if record.torch is not None and record.torch != torch.__version__:
        return None, (f"the plan recorded for {key} was tuned under torch {record.torch}, not {torch.__version__}: "
                      "timing at start-up")
    return record, f"the plan recorded for {key} by tune at {record.tuned}"


def replayed(record: ModelPlanRecord, device: torch.device, dtype: torch.dtype, config: ModelConfig,
             free_bytes: int | None) -> StartupMeasurements:
    """The record's timings as start-up measurements, less any kernel whose check fails here now (no timing)."""
    checks = {PACKED: lambda: packed_check(device, dtype), PANELS: lambda: panels_why_not(device, dtype, config)}
    failing = {kind: why for kind, check in checks.items()
               if any(kind in row for row in record.layout_times.values()) and (why := check())}
    times = {rows: {k: t for k, t in row.items() if k not in failing}  # by rows, as they were timed
             for rows, row in sorted(record.layout_times.items())}
    paged = (record.paged_decode, record.paged_decode_evidence)
    if record.paged_decode:
        why, _ = paged_decode_why_not(device, dtype, config.num_heads, config.num_kv_heads, config.head_dim)
        if why is not None:
            paged = (False, f"recorded faster, but its check fails now: {why}")
    decode = DecodeTimings(
        candidates={name: (c.candidate_s, c.plain_s) for name, c in record.candidates.items()},
        by_batch=dict(record.by_batch), skipped=dict(record.candidates_skipped), how=record.decode_how,
        spreads={name: c.spread for name, c in record.candidates.items()},
        batch_spreads=dict(record.batch_spreads), by_batch_again=dict(record.by_batch_again),
        memory_batch=record.memory_batch, cpu_share=record.cpu_share,
        fused_rows={b: (c.candidate_s, c.plain_s) for b, c in record.fused_rows.items()},
        fused_rows_spreads={b: c.spread for b, c in record.fused_rows.items()})
    return StartupMeasurements(
        layouts=LayoutTimings(times, {**record.layout_skipped, **{k: f"its check fails now: {w}"
                                                                   for k, w in failing.items()}},
                              record.layout_stream_bytes, record.layout_spreads),
        paged_decode=paged, free_bytes=free_bytes, decode=decode, fused_decode=record.fused_decode,
        **replayed_fields(record))


def marked(plan: ExecutionPlan, record: ModelPlanRecord, seqs_requested: bool) -> ExecutionPlan:
    """The plan with each setting the record decided saying so, first."""
    said = f"recorded by tune at {record.tuned} on this device"
    settings = [s for s in MEASURED_SETTINGS if not (s == "max_num_seqs" and seqs_requested)]
    return replace(plan, **{s: Choice(getattr(plan, s).value, f"{said}: {getattr(plan, s).evidence}")
                            for s in settings})


def plan_record(measured: StartupMeasurements, plan: ExecutionPlan, model: str, source: Path | None,
                fingerprint: str, tuned: str, bringup: str, runs: int, noise: dict[str, float],
                quantization: str = "none") -> ModelPlanRecord:
    """What tune writes: the combined timings and the plan they gave."""
    decode = measured.decode or DecodeTimings()
    return ModelPlanRecord(
        model=model, source=str(source) if source is not None else "built-in",
        model_sha256=fingerprint, device=plan.device, dtype=plan.dtype.value,
        quantization=quantization, tuned=tuned,
        bringup=bringup, runs=runs,
        plan={name: RecordedChoice(value=getattr(plan, name).value, evidence=getattr(plan, name).evidence,
                                   shown=plan.shown(name)) for name in SETTING_NAMES},
        plan_format=PLAN_VALUES_AS_DATA, block_size=plan.block_size,
        layout_times=measured.layouts.times, layout_skipped=measured.layouts.skipped,
        layout_stream_bytes=measured.layouts.stream_bytes, layout_spreads=measured.layouts.spreads,
        paged_decode=measured.paged_decode[0],
        paged_decode_evidence=measured.paged_decode[1], fused_decode=measured.fused_decode,
        candidates={name: CandidateRecord(candidate_s=c, plain_s=p, spread=decode.spreads.get(name, 0.0))
                    for name, (c, p) in decode.candidates.items()},
        candidates_skipped=decode.skipped, decode_how=decode.how, by_batch=decode.by_batch,
        by_batch_again=decode.by_batch_again, batch_spreads=decode.batch_spreads, memory_batch=decode.memory_batch,
        fused_rows={b: CandidateRecord(candidate_s=f, plain_s=m, spread=decode.fused_rows_spreads.get(b, 0.0))
                    for b, (f, m) in decode.fused_rows.items()},
        noise=noise, cpu_share=decode.cpu_share, torch=torch.__version__, **recorded_fields(measured))
