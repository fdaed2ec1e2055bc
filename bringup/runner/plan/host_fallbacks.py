"""Ops that the profile records running through the host (runs_on host_fallback): how the plan ranks paths by
them, and which of the planned hot path's ops still fall back (shown in the plan, logged and counted at start-up).

A path whose ops fall back ranks after an alternative whose ops do not; where nothing better exists it is still
used. An op case without a placement (verify-ops on the host itself, or a profile recorded before placement was
detected) is not evidence of a fallback.
"""

from __future__ import annotations

from bringup.profiles.hot_path import FUSED_NORM_OPS, SAMPLING_OPS
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.profile_facts import OpVerdict, ProfileFacts

SAMPLING_DTYPE = "float32"  # sampling runs on the step's float32 logits
FUSED_NORM_DTYPE = "float32"  # RMS norm is the fused op in float32 (runner/model/norm.py)
NO_PLACEMENT = "the profile records no op case running through the host"


def on_device_first(names: list[str], verdicts: dict[str, OpVerdict]) -> tuple[list[str], str]:
    """`names` with those whose ops fall back after the others (otherwise in order), and a note saying which
    moved and why ('' when nothing moved)."""
    on_device = [n for n in names if not verdicts[n].falls_back]
    host = [n for n in names if verdicts[n].falls_back]
    if not host or not on_device or names == on_device + host:
        return names, ""
    moved = "; ".join(f"{n} falls back to the host ({verdicts[n].fallback_notes()})" for n in host)
    return on_device + host, f"{moved}; {' and '.join(runs_where(n, verdicts[n]) for n in on_device)}: tried first"


def runs_where(name: str, verdict: OpVerdict) -> str:
    """'matmul_softmax runs on the device (4 op cases)', or that no case of it is recorded falling back."""
    if verdict.on_device:
        return f"{name} runs on the device ({verdict.on_device} op case(s))"
    return f"{name} is not recorded falling back"


def fewer_fallbacks(verdict: OpVerdict, other: OpVerdict) -> bool:
    """Whether `verdict` is verified and has fewer ops falling back to the host than `other`."""
    return verdict.verified and len(verdict.host_fallback) < len(other.host_fallback)


def hot_path_fallbacks(facts: ProfileFacts, dtype: str, model_ops: set[str]) -> dict[str, str]:
    """The planned hot path's ops (`model_ops` at the plan's dtype, sampling at float32) that the profile records
    running through the host, each with its evidence, by name."""
    notes = {}
    decoder = model_ops | (FUSED_NORM_OPS if dtype == FUSED_NORM_DTYPE else set())
    for ops, at in ((decoder - SAMPLING_OPS, dtype), (set(SAMPLING_OPS), SAMPLING_DTYPE)):
        verdict = facts.ops(at, ops)
        notes |= {op: f"{op} at {at}: {evidence}" for op, evidence in verdict.host_fallback.items()}
    return dict(sorted(notes.items()))


def fallbacks_choice(notes: dict[str, str]) -> Choice:
    return Choice(list(notes), "; ".join(notes.values()) or NO_PLACEMENT)
