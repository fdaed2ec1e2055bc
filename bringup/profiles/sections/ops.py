"""Profile records of `bringup verify-ops`: one per op case, one per eager-vs-compiled comparison.

These are the only shapes of a verify-ops result: the executor creates them, the worker pipe carries
them (model_dump / model_validate), the stage merges them and the CLI renders them unchanged.

A case label recorded before op cases were typed (hand-written, e.g. "decode [1,4096]x[4096,1024]") is read as
the label derived now ("decode [1,4096] [4096,1024]") through op_case_renames.yaml, so old profiles and
baselines keep pairing with new runs.
"""

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, model_validator

from bringup.profiles.base_model import ProfileModel

# where an op case executed, decided from what it dispatched while it ran (bringup/probes/ops/placement.py):
# "device", or "host_fallback" when it copied its tensors to the host and back (a backend's boxed CPU fallback)
RunsOn = Literal["device", "host_fallback"]
ON_DEVICE: RunsOn = "device"
HOST_FALLBACK: RunsOn = "host_fallback"
OpStatus = Literal["pass", "fail", "error", "unsupported", "crashed", "timeout"]
CompiledStatus = Literal["pass", "mismatch", "compile_error", "error", "unsupported", "crashed", "timeout"]
FAILING_OP_STATUSES: frozenset[str] = frozenset({"fail", "error", "crashed", "timeout"})
FAILING_COMPILED_STATUSES: frozenset[str] = frozenset({"mismatch", "compile_error", "error", "crashed", "timeout"})


RENAMES_FILE = Path(__file__).with_name("op_case_renames.yaml")


@lru_cache(maxsize=1)
def case_renames() -> dict[str, dict[str, str]]:
    """op -> {label before op cases were typed: the label derived now} (scripts/derive_op_case_renames.py)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's: 30x faster, read on the first record
    return yaml.load(RENAMES_FILE.read_text(encoding="utf-8"), Loader=loader)["renames"]


def current_case(op: str, case: str) -> str:
    """The label a case recorded under an earlier catalog's hand-written name has now (unchanged otherwise)."""
    return case_renames().get(op, {}).get(case, case)


@lru_cache(maxsize=1)
def _former_labels() -> dict[str, dict[str, str]]:
    return {op: {new: old for old, new in table.items()} for op, table in case_renames().items()}


def former_case(op: str, case: str) -> str:
    """The hand-written label a case had before op cases were typed (the case's own label when it had none)."""
    return _former_labels().get(op, {}).get(case, case)


def _migrated(data: Any, op_field: str) -> Any:
    """A record's raw fields with an old case label replaced by the current one."""
    if isinstance(data, dict) and isinstance(data.get(op_field), str) and isinstance(data.get("case"), str):
        case = current_case(data[op_field], data["case"])
        if case != data["case"]:
            return {**data, "case": case}
    return data


def migrated_bench_record(data: Any) -> Any:
    """A bench `ops` record (key "op dtype case", params op/case) with an old case label replaced."""
    if not isinstance(data, dict) or not isinstance(data.get("params"), dict):
        return data
    params = data["params"]
    op, case = params.get("op"), params.get("case")
    if not isinstance(op, str) or not isinstance(case, str):
        return data
    new = current_case(op, case)
    old_key = f"{op} {data.get('dtype')} {case}"
    if new == case or data.get("key") != old_key:
        return data
    return {**data, "key": f"{op} {data.get('dtype')} {new}", "params": {**params, "case": new}}


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

    @model_validator(mode="before")
    @classmethod
    def _current_label(cls, data: Any) -> Any:
        return _migrated(data, "op")

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

    @model_validator(mode="before")
    @classmethod
    def _current_label(cls, data: Any) -> Any:
        return _migrated(data, "target")

    def key(self) -> tuple[str, str | None, str, str]:
        return (self.target, self.case, self.dtype, self.backend)

    @property
    def failing(self) -> bool:
        return self.status in FAILING_COMPILED_STATUSES


VerifyOpsRecord = OpCaseRecord | CompiledRecord
