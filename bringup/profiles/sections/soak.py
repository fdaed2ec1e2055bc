"""Profile section of `bringup soak`: the same work repeated for minutes, watching rate and results."""

from typing import Literal

from bringup.profiles.base_model import ProfileModel


class SoakDtype(ProfileModel):
    """One dtype's rounds: matmul rate over time and the rounds whose results were wrong."""

    dtype: str
    rounds: int
    first_tflops: float  # median of the first fifth of the rounds
    last_tflops: float  # median of the last fifth
    min_tflops: float
    max_tflops: float
    ratio: float  # last / first: below DRIFT_LIMIT is drift (throttling, a neighbour, a clock change)
    wrong_rounds: list[int] = []  # rounds whose results fell outside the tolerance
    bitwise_changes: int = 0  # rounds whose results differ bit for bit from the first round's (nondeterminism)


class SoakSection(ProfileModel):
    status: Literal["pass", "fail"]  # fail: a wrong result in some round
    seconds: float
    matmul_size: int
    checks: list[str]  # what each round computes and compares
    dtypes: list[SoakDtype] = []
    findings: list[str] = []  # intermittent or persistent wrong results, drift beyond the limit
