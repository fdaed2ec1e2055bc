"""Profile records of `bringup verify-ops`: one per op case, one per eager-vs-compiled comparison.

These are the only shapes of a verify-ops result: the executor creates them, the worker pipe carries
them (model_dump / model_validate), the stage merges them and the CLI renders them unchanged.

An op case is recorded with its label (`case`, display only) and its identity (`case_id`, derived from the case's
shapes, view and params: bringup/probes/ops/spec.py); records pair by the identity when they have one.
"""

from typing import Literal

from pydantic import ConfigDict

from bringup.profiles.base_model import ProfileModel
from bringup.profiles.sections.graph_replay import GraphReplayRecord

# where an op case executed, decided from what it dispatched while it ran (bringup/probes/ops/placement.py):
# "device", or "host_fallback" when it copied its tensors to the host and back (a backend's boxed CPU fallback)
RunsOn = Literal["device", "host_fallback"]
ON_DEVICE: RunsOn = "device"
HOST_FALLBACK: RunsOn = "host_fallback"
OpStatus = Literal["pass", "fail", "error", "unsupported", "crashed", "timeout"]
CompiledStatus = Literal["pass", "mismatch", "compile_error", "error", "unsupported", "crashed", "timeout"]
FAILING_OP_STATUSES: frozenset[str] = frozenset({"fail", "error", "crashed", "timeout"})
FAILING_COMPILED_STATUSES: frozenset[str] = frozenset({"mismatch", "compile_error", "error", "crashed", "timeout"})


class OpCaseRecord(ProfileModel):
    """One op case on one dtype, judged against the float64 CPU reference."""

    model_config = ConfigDict(validate_assignment=True)  # filled in field by field while the case runs

    op: str
    dtype: str
    case: str  # the label, for display
    case_id: str | None = None  # the case's identity (None: recorded before cases had one, or not in the catalog)
    status: OpStatus
    max_abs: float | None = None
    max_rel: float | None = None
    nmse: float | None = None
    worst_index: list[int] | None = None
    worst_output: int | None = None  # which output of a tuple result holds the worst element
    rtol: float | None = None  # the tolerance applied, for an op without an arithmetic rule (judge/tolerances.py)
    atol: float | None = None
    bound: float | None = None  # the allowed error at the worst element: the op's error bound (judge/bounds.py)
    bound_ratio: float | None = None  # largest error / allowed error (above 1 fails)
    bias: float | None = None  # least-squares scale of result vs reference, minus 1 (judge/bias.py)
    bias_z: float | None = None  # the bias over its standard error
    decided_by: str | None = None  # the test that decided: exact, bound, bias, tolerance, chi-square, ...
    seconds: float | None = None
    message: str | None = None
    runs_on: RunsOn | None = None  # None: not decided (on the host itself there is nothing to fall back to)
    runs_on_evidence: str | None = None  # what it dispatched, e.g. "aten::_to_cpu x1, aten::_copy_from x1"

    def key(self) -> tuple[str, str, str]:
        """(op, dtype, case id) — the label stands in for a record without an id."""
        return (self.op, self.dtype, self.case_id or self.case)

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
    case_id: str | None = None  # the op case's identity (see OpCaseRecord)
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
        return (self.target, self.case_id or self.case, self.dtype, self.backend)

    @property
    def failing(self) -> bool:
        return self.status in FAILING_COMPILED_STATUSES


VerifyOpsRecord = OpCaseRecord | CompiledRecord | GraphReplayRecord
