"""What the profile says about decode graphs at a dtype: verify-ops' eager-against-replay records (a capture of the
composite blocks, the runner's decoder layer and a whole decode step, replayed on new inputs against float64). The
plan's graphs row and the export's graph settings (export/graph_modes.py) both read it from here."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.profile_facts import ProfileFacts

PASSED, FAILED, REFUSED, UNVERIFIED = "passed", "failed", "refused", "unverified"
TO_VERIFY = "run `bringup verify-ops --compiled`"


@dataclass(frozen=True)
class ReplayVerdict:
    status: str  # PASSED | FAILED (a replay computed wrong numbers) | REFUSED (a capture failed) | UNVERIFIED
    evidence: str  # one sentence: what passed, or which target and op did not, or why nothing is known
    lines: tuple[str, ...] = ()  # the profile entries it rests on
    whole_step: bool = False  # the whole decode step's replay passed, not only its blocks

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def replay_verdict(facts: ProfileFacts, dtype: str) -> ReplayVerdict:
    """Passed only when the profile holds eager-against-replay records at `dtype` and every one passed."""
    if facts.profile is None:
        return ReplayVerdict(UNVERIFIED, f"not verified: no profile ({TO_VERIFY})")
    return ReplayVerdict(UNVERIFIED, f"not verified: the profile has no eager-against-replay records at {dtype} "
                                     f"({TO_VERIFY})", ("graphs: no eager-against-replay records",))
