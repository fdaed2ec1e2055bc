"""Profile section of `bringup tune`: per served model, the plan it was measured to run best with on this device,
and every timing behind it, so a later start-up takes the same choices from the same numbers without timing."""

from __future__ import annotations

from typing import Any, ClassVar

from bringup.profiles.base_model import ProfileModel


class RecordedChoice(ProfileModel):
    value: Any
    evidence: str


class CandidateRecord(ProfileModel):
    """Seconds per decode step of the served model with a candidate path and with its plain alternative."""

    floats_checked_later: ClassVar[bool] = True  # runner/plan/record/bounds.py, as a fallback at start-up

    candidate_s: float
    plain_s: float
    spread: float = 0.0  # relative spread of the repeated timings (the machine's own noise)


class ModelPlanRecord(ProfileModel):
    """One tuned model, keyed in the profile by `name [short hash of its config and weights' index]`."""

    floats_checked_later: ClassVar[bool] = True  # runner/plan/record/bounds.py, as a fallback at start-up

    model: str
    source: str  # the directory or .gguf file given, or "built-in"
    model_sha256: str
    device: str
    dtype: str
    quantization: str = "none"  # the --quantization it was tuned under (records from before it said nothing: none)
    tuned: str  # when tune recorded it (UTC, ISO 8601)
    bringup: str
    runs: int  # start-up measurements tune combined
    plan: dict[str, RecordedChoice]  # setting -> the choice and its evidence, as the plan table shows them
    # the combined timings the choices were made from (replayed at start-up)
    layout_times: dict[int, dict[str, float]]  # rows -> weight kind -> seconds per product
    layout_skipped: dict[str, str] = {}
    layout_stream_bytes: int
    layout_spreads: dict[int, dict[str, float]] = {}  # rows -> weight kind -> spread across the runs
    paged_decode: bool
    paged_decode_evidence: str
    fused_decode: bool = True
    candidates: dict[str, CandidateRecord] = {}
    candidates_skipped: dict[str, str] = {}
    decode_how: str = ""
    by_batch: dict[int, float] = {}  # batch size -> seconds per decode step
    by_batch_again: dict[int, float] = {}
    batch_spreads: dict[int, float] = {}
    memory_batch: int | None = None
    noise: dict[str, float] = {}  # what -> floor noise across tune's runs
    cpu_share: float | None = None  # the smallest share of the CPU tune's timed threads got (None: not measured)
