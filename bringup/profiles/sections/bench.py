"""Profile section of `bringup bench` (placeholder until the bench stage lands)."""

from typing import Any

from bringup.profiles.base_model import ProfileModel


class BenchSection(ProfileModel):
    settings: dict[str, Any] = {}
    groups: dict[str, list[dict[str, Any]]] = {}
