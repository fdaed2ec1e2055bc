"""Which tune record to keep when `bringup tune` runs again: the new one, unless its timings ran on a contended
machine and the earlier record of the same model, dtype and quantization was timed on a quiet one. A busy hour must
not replace the known-good record with the plan it made slow; it says so instead, and keeps the earlier evidence."""

from __future__ import annotations

from bringup.profiles.sections.models import ModelPlanRecord
from bringup.runner.plan.noise import CONTENDED_SHARE, contended


def cleaner_record(new: ModelPlanRecord, earlier: ModelPlanRecord | None) -> tuple[ModelPlanRecord, str | None]:
    """(the record to keep, why the earlier one was kept; None when the new one is kept)."""
    if earlier is None or not contended(new.cpu_share) or earlier.cpu_share is None or contended(earlier.cpu_share):
        return new, None
    if (earlier.dtype, earlier.quantization, earlier.model_sha256) != (new.dtype, new.quantization, new.model_sha256):
        return new, None
    return earlier, (f"this tune's timings ran on a contended machine (its timed threads had {new.cpu_share:.0%} of "
                     f"the CPU, under {CONTENDED_SHARE:.0%}), while the record tuned at {earlier.tuned} was timed "
                     f"with {earlier.cpu_share:.0%}: the earlier record is kept. Re-run `bringup tune` at a quiet "
                     "moment, or pass --replace to record this one anyway")
