"""The profile's capability checks as report rows (marked against a baseline by baseline.py)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.profiles.schema import Profile
from bringup.profiles.verdict.capability_checks import capability_checks


@dataclass
class CapabilityRow:
    group: str
    name: str
    status: str
    note: str  # the evidence when supported, else the reason
    seconds: float | None
    before: str | None = None  # the baseline's status when it differs
    not_applicable: bool = False  # the backend declares the family has no such thing (the verdict skips it)

    @property
    def key(self) -> str:
        return f"{self.group}.{self.name}"


def capability_rows(profile: Profile) -> list[CapabilityRow]:
    """One row per check; an unsupported one's note is the verdict's reason (what does not apply here, and why
    ops may still pass in a dtype the probe calls unsupported)."""
    if profile.capabilities is None:
        return []
    verdicts = {c.name: c for c in capability_checks(profile.capabilities, profile.ops)}
    return [
        CapabilityRow(group, name, cap.status,
                      cap.evidence or "" if cap.status == "supported" else verdicts[f"{group}.{name}"].reason,
                      cap.seconds, not_applicable=verdicts[f"{group}.{name}"].result == "skip")
        for group, checks in profile.capabilities.groups().items()
        for name, cap in checks.items()
    ]
