"""What the profile says about decode graphs at a dtype: verify-ops' eager-against-replay records (a capture of the
composite blocks, the runner's decoder layer and a whole decode step, replayed on new inputs against float64)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.profile_facts import ProfileFacts


@dataclass(frozen=True)
class ReplayVerdict:
    passed: bool
    evidence: str  # the records it rests on, or why graphs are not verified


def replay_verdict(facts: ProfileFacts, dtype: str) -> ReplayVerdict:
    """Passed only when the profile holds eager-against-replay records at `dtype` and every one passed."""
    if facts.profile is None:
        return ReplayVerdict(False, "not verified: no profile (run `bringup verify-ops --compiled`)")
    return ReplayVerdict(False, "not verified: the profile has no eager-against-replay records "
                                "(run `bringup verify-ops --compiled`)")
