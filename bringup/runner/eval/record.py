"""An eval's result as the profile records it, under a key naming the model and a short hash of what was evaluated."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bringup.profiles.sections.eval import EvalRecord, EvalReferenceRecord
from bringup.runner.eval.reference_header import ReferenceHeader
from bringup.runner.eval.run import EvalResult, NonFiniteScores
from bringup.runner.sources.identity import model_files_sha256

KEY_HASH_CHARS = 8


def eval_key(result: EvalResult, model: Path | None) -> str:
    """`name [hash]`: the hash of the model's files, the text, the windows and the dtype, so another checkpoint under
    the same name, or the same model in another dtype, gets its own entry and a rerun replaces its own."""
    s = result.settings
    what = f"{model_files_sha256(model)} {result.text_sha256} {result.text_tokens} {s.ctx} {s.stride} {result.dtype}"
    return f"{result.model} [{hashlib.sha256(what.encode()).hexdigest()[:KEY_HASH_CHARS]}]"


def eval_record(result: EvalResult, reference_header: ReferenceHeader | None = None) -> EvalRecord:
    """The profile's record of `result`; NonFiniteScores when a figure is NaN or infinite, so none is recorded."""
    r = result.reference
    reference = None if r is None else EvalReferenceRecord(
        source=r.source, exact=r.exact, k=r.k, kld_mean=r.kld_mean, kld_p99=r.kld_p99, kld_max=r.kld_max,
        top1_agreement=r.top1_agreement, reference_ppl=r.reference_ppl, delta_ppl=r.delta_ppl,
        rest_mass_mean=r.rest_mass_mean,
        reference_dtype=reference_header.dtype if reference_header else "float64",
        reference_device=reference_header.device if reference_header else "cpu")
    record = EvalRecord(
        model=result.model, dtype=result.dtype, device=result.device, ctx=result.settings.ctx,
        stride=result.settings.stride, text=result.text_source, text_sha256=result.text_sha256,
        tokens=result.text_tokens, scored=result.nll.tokens, windows=result.windows, ppl=result.nll.ppl,
        nll=result.nll.nll, se=result.nll.se, tokens_per_s=result.tokens_per_s, seconds=result.seconds,
        reference=reference, fallbacks=dict(result.fallbacks),
        finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    for name, value in figures(record.model_dump()):
        if not math.isfinite(value):
            raise NonFiniteScores(f"eval's {name} came out {value}; numbers that cannot be trusted are not recorded: "
                                  "check the model's weights and dtype (try --dtype float32) and the reference, and "
                                  "run `bringup verify-ops` on this device")
    return record


def figures(values: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, float]]:
    """Every float of a dumped record, by dotted name (reference.kld_mean)."""
    for key, value in values.items():
        if isinstance(value, dict):
            yield from figures(value, f"{prefix}{key}.")
        elif isinstance(value, float):
            yield prefix + key, value
