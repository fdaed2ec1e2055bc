"""Profile records of verify-ops' eager-against-replay comparison: one per block and dtype (the `graph_replay`
section; docs/stages/verify-ops.md, "Eager against graph replay", is the contract the runner reads)."""

from typing import Literal

from pydantic import ConfigDict

from bringup.profiles.base_model import ProfileModel

ReplayStatus = Literal["pass", "mismatch", "capture_unsupported", "error", "skipped", "crashed", "timeout"]
FAILING_REPLAY_STATUSES: frozenset[str] = frozenset({"mismatch", "error", "crashed", "timeout"})
DECODE_STEP = "runner_decode_step"  # the target of the runner's whole decode step, whose record the plan reads


class GraphReplayRecord(ProfileModel):
    """A block captured with the device's graph API and replayed with new values in its static inputs, each replay
    judged against float64 by the eager-vs-compiled rule: replay_err <= k * eager_err + tol / 10 (`allowed`; the
    worst replay's figures). A mismatch names the first op whose replayed output differs from eager."""

    model_config = ConfigDict(validate_assignment=True)  # filled in field by field while the comparison runs

    target: str
    dtype: str
    api: str | None = None  # torch.accelerator.Graph, torch.cuda.CUDAGraph; None where the backend has none
    status: ReplayStatus
    replays: int = 0
    eager_err: float | None = None
    replay_err: float | None = None
    allowed: float | None = None
    k: float | None = None
    first_bad_op: str | None = None
    seconds: float | None = None
    message: str | None = None

    def key(self) -> tuple[str, str]:
        return (self.target, self.dtype)

    @property
    def failing(self) -> bool:
        return self.status in FAILING_REPLAY_STATUSES
