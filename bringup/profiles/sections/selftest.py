"""Profile section of `bringup selftest` (placeholder until the runner lands)."""

from typing import Literal

from bringup.profiles.base_model import ProfileModel


class SelftestSection(ProfileModel):
    status: Literal["pass", "fail"]
    dtype: str
    max_abs_err: float
    top1_agreement: float
    threshold: float
