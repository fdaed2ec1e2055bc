"""Profile section of `bringup verify-collectives` (placeholder until that stage lands)."""

from typing import Any

from bringup.profiles.base_model import ProfileModel


class CollectivesSection(ProfileModel):
    world_size: int
    backend: str
    results: list[dict[str, Any]] = []
