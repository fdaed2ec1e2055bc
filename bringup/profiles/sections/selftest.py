"""Profile section of `bringup selftest`: the runner's logits on the device vs CPU float64."""

from typing import Literal

from bringup.profiles.base_model import ProfileModel


class SelftestSection(ProfileModel):
    """End-to-end numerics of the runner with the plan's dtype and paths, teacher-forced greedy steps."""

    status: Literal["pass", "fail"]
    model: str
    device: str
    dtype: str
    attention: str  # the implementation that ran (after any op fallback)
    compiled: str | None = None  # compile backend, None = eager
    weight_layout: str
    prompt_tokens: int
    steps: int
    max_abs_err: float
    reference_rms: float
    threshold: float  # max_abs_err must stay below this (dtype-aware, scaled by reference_rms)
    top1_agreement: float  # fraction of steps whose top-1 token matches the float64 reference
    near_tie_disagreements: int = 0  # disagreements where the reference's top two are within threshold
    fallbacks: dict[str, int] = {}
    reason: str | None = None
    seconds: float | None = None
