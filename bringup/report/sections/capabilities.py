"""The profile's capability checks as report rows (marked against a baseline by baseline.py)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.profiles.schema import Profile


@dataclass
class CapabilityRow:
    group: str
    name: str
    status: str
    note: str  # the evidence when supported, else the reason
    seconds: float | None
    before: str | None = None  # the baseline's status when it differs

    @property
    def key(self) -> str:
        return f"{self.group}.{self.name}"


def capability_rows(profile: Profile) -> list[CapabilityRow]:
    if profile.capabilities is None:
        return []
    return [
        CapabilityRow(group, name, cap.status, cap.evidence or cap.reason or "", cap.seconds)
        for group, checks in profile.capabilities.groups().items()
        for name, cap in checks.items()
    ]
