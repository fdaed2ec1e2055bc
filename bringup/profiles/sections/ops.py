"""Profile records of `bringup verify-ops` (placeholder until the verify-ops stage lands)."""

from typing import Literal

from bringup.profiles.base_model import ProfileModel


class OpCaseRecord(ProfileModel):
    op: str
    dtype: str
    case: str
    status: Literal["pass", "fail", "error", "unsupported", "crashed", "timeout"]
    max_abs: float | None = None
    max_rel: float | None = None
    nmse: float | None = None
    tolerance: float | None = None
    seconds: float | None = None
    message: str | None = None


class CompiledRecord(ProfileModel):
    target: str
    dtype: str
    backend: str
    status: Literal["pass", "mismatch", "compile_error"]
    eager_err: float | None = None
    compiled_err: float | None = None
    failing_backend: str | None = None
    compile_s: float | None = None
    speedup: float | None = None
