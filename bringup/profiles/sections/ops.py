"""Profile records of `bringup verify-ops`: one per op case, one per eager-vs-compiled comparison.

These are the only shapes of a verify-ops result: the executor creates them, the worker pipe carries
them (model_dump / model_validate), the stage merges them and the CLI renders them unchanged.
"""

from typing import Literal

from pydantic import ConfigDict

from bringup.profiles.base_model import ProfileModel

OpStatus = Literal["pass", "fail", "error", "unsupported", "crashed", "timeout"]
CompiledStatus = Literal["pass", "mismatch", "compile_error", "error", "unsupported", "crashed", "timeout"]
FAILING_OP_STATUSES: frozenset[str] = frozenset({"fail", "error", "crashed", "timeout"})
FAILING_COMPILED_STATUSES: frozenset[str] = frozenset({"mismatch", "compile_error", "error", "crashed", "timeout"})


class OpCaseRecord(ProfileModel):
    """One op case on one dtype, judged against the float64 CPU reference."""

    model_config = ConfigDict(validate_assignment=True)  # filled in field by field while the case runs

    op: str
    dtype: str
    case: str
    status: OpStatus
    max_abs: float | None = None
    max_rel: float | None = None
    nmse: float | None = None
    worst_index: list[int] | None = None
    worst_output: int | None = None  # which output of a tuple result holds the worst element
    rtol: float | None = None  # the tolerance applied (see bringup/probes/ops/tolerances.py for reasons)
    atol: float | None = None
    seconds: float | None = None
    message: str | None = None

    def key(self) -> tuple[str, str, str]:
        return (self.op, self.dtype, self.case)

    @property
    def failing(self) -> bool:
        """A wrong result or a malfunction (unsupported is a rejection, not a failure)."""
        return self.status in FAILING_OP_STATUSES


class CompiledRecord(ProfileModel):
    """Eager vs torch.compile for one target (an op case or a composite block) on one dtype.

    Errors are RMSE against the float64 reference; accepted when
    compiled_err <= k * eager_err + tol / 10 (`allowed`). On mismatch or compile error the ladder
    eager -> aot_eager -> aot_eager_decomp_partition -> <backend> is bisected and `failing_backend`
    names the first rung that breaks (`ladder` holds every rung's verdict).
    """

    model_config = ConfigDict(validate_assignment=True)  # filled in field by field while the comparison runs

    target: str
    case: str | None = None  # the op case label when target is an op; None for a composite block
    dtype: str
    backend: str
    status: CompiledStatus
    eager_err: float | None = None
    compiled_err: float | None = None
    allowed: float | None = None
    k: float | None = None
    failing_backend: str | None = None
    ladder: dict[str, str] = {}
    compile_s: float | None = None
    eager_s: float | None = None
    compiled_s: float | None = None
    speedup: float | None = None  # eager_s / compiled_s at steady state (> 1: compiled is faster)
    seconds: float | None = None
    message: str | None = None

    def key(self) -> tuple[str, str | None, str, str]:
        return (self.target, self.case, self.dtype, self.backend)

    @property
    def failing(self) -> bool:
        return self.status in FAILING_COMPILED_STATUSES


VerifyOpsRecord = OpCaseRecord | CompiledRecord
