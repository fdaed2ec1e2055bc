"""What the profile says about decode graphs at a dtype: verify-ops' eager-against-replay records (the profile's
`graph_replay` section, docs/stages/verify-ops.md: a capture of the composite blocks, the runner's decoder layer and a
whole decode step, replayed on new inputs against float64). The plan's graphs row and the export's graph settings
(export/graph_modes.py) both read it from here.

The record of the runner's whole decode step (`runner_decode_step`) at the dtype decides: `pass` verified,
`mismatch` failed the replay check (naming the first op whose replay differs), `capture_unsupported` capture refused
an op (the device's error); no record, `skipped` or `error`: not verified. The other blocks' records are cited, and
decide vLLM's piecewise mode where the whole step is not verified.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.profiles.sections.graph_replay import DECODE_STEP
from bringup.runner.plan.profile_facts import ProfileFacts

PASSED, FAILED, REFUSED, UNVERIFIED = "passed", "failed", "refused", "unverified"
TO_VERIFY = "run `bringup verify-ops --compiled`"
MESSAGE_CHARS = 200


@dataclass(frozen=True)
class ReplayVerdict:
    status: str  # PASSED | FAILED (a replay computed wrong numbers) | REFUSED (a capture failed) | UNVERIFIED
    evidence: str  # one sentence: what passed, or which target and op did not, or why nothing is known
    lines: tuple[str, ...] = ()  # the profile entries it rests on
    whole_step: bool = False  # the whole decode step's replay passed, and no block's failed
    step_passed: bool = False  # the runner_decode_step record passed (what the runner's graphs row needs)

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def replay_records(facts: ProfileFacts, dtype: str) -> list[Any]:
    """The profile's graph_replay records at `dtype` ([] without a profile or the section)."""
    records = getattr(facts.profile, "graph_replay", None) or []
    return [r for r in records if r.dtype == dtype]


def replay_verdict(facts: ProfileFacts, dtype: str) -> ReplayVerdict:
    """From the whole decode step's record at `dtype`; without it, the blocks' (passed: not the whole step)."""
    if facts.profile is None:
        return ReplayVerdict(UNVERIFIED, f"not verified: no profile ({TO_VERIFY})")
    records = replay_records(facts, dtype)
    lines = tuple(_line(r) for r in records)
    step = next((r for r in records if r.target == DECODE_STEP), None)
    blocks = [r for r in records if r.target != DECODE_STEP]
    if step is not None and step.status == "mismatch":
        return ReplayVerdict(FAILED, f"failed the replay check: verify-ops' {DECODE_STEP} at {dtype} replayed wrong "
                                     f"numbers (first op whose replay differs: {step.first_bad_op or 'not found'})",
                             lines)
    if step is not None and step.status == "capture_unsupported":
        return ReplayVerdict(REFUSED, f"capture refused an op: verify-ops' {DECODE_STEP} at {dtype}: "
                                      f"{_short(step.message)}", lines)
    bad_blocks = [r for r in blocks if r.status in ("mismatch", "capture_unsupported")]
    if step is not None and step.status == "pass":
        said = f"; {len(bad_blocks)} block(s) did not pass: {_names(bad_blocks)}" if bad_blocks else ""
        return ReplayVerdict(PASSED, f"verify-ops replayed {DECODE_STEP} at {dtype} right ({step.replays} replays "
                                     f"on new inputs, replay error {_figure(step.replay_err)} vs eager "
                                     f"{_figure(step.eager_err)}){said}", lines, whole_step=not bad_blocks,
                             step_passed=True)
    passed_blocks = [r for r in blocks if r.status == "pass"]
    if passed_blocks and not bad_blocks:
        return ReplayVerdict(PASSED, f"verify-ops replayed {len(passed_blocks)} block(s) at {dtype} right "
                                     f"({_names(passed_blocks)}); {_missing(step, dtype)}", lines)
    if bad_blocks:
        worst = bad_blocks[0]
        status = FAILED if worst.status == "mismatch" else REFUSED
        what = (f"failed the replay check: verify-ops' {worst.target} replayed wrong numbers (first op whose "
                f"replay differs: {worst.first_bad_op or 'not found'})" if status == FAILED else
                f"capture refused an op: verify-ops' {worst.target}: {_short(worst.message)}")
        return ReplayVerdict(status, f"{what}; {_missing(step, dtype)}", lines)
    return ReplayVerdict(UNVERIFIED, f"not verified: {_missing(step, dtype)} ({TO_VERIFY})",
                         lines or ("graph_replay: no records at " + dtype,))


def _missing(step: Any, dtype: str) -> str:
    if step is None:
        return f"no {DECODE_STEP} record at {dtype}"
    return f"{DECODE_STEP} at {dtype} is {step.status}" + (f" ({_short(step.message)})" if step.message else "")


def _line(record: Any) -> str:
    detail = record.first_bad_op if record.status == "mismatch" else None
    return f"graph_replay: {record.target} at {record.dtype}: {record.status}" + (f" ({detail})" if detail else "")


def _names(records: list[Any]) -> str:
    return ", ".join(r.target for r in records)


def _short(text: str | None) -> str:
    text = " ".join((text or "no message").split())
    return text if len(text) <= MESSAGE_CHARS else text[: MESSAGE_CHARS - 1] + "…"


def _figure(value: float | None) -> str:
    return "not recorded" if value is None else f"{value:.3g}"
