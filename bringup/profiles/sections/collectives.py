"""Profile section written by `bringup verify-collectives`: the world that ran, per-case correctness
(wrong-element counts, summed over ranks) and bandwidth (nccl-tests algbw/busbw), and any faults."""

from typing import Literal, Optional

from bringup.profiles.base_model import ProfileModel

CaseStatus = Literal["pass", "fail", "error", "skipped", "unsupported", "crashed", "timeout"]
FaultKind = Literal["exited", "hung", "startup", "error", "interrupted"]


class CollectiveCaseRecord(ProfileModel):
    op: str                              # all_reduce_sum | all_reduce_max | all_gather | reduce_scatter | ...
    dtype: str                           # "-" for the barrier
    size_bytes: int                      # nccl-tests size: buffer, all_gather output, reduce_scatter input
    count: int                           # elements in that buffer
    status: CaseStatus
    wrong: Optional[int] = None          # wrong elements, worst repetition per rank, summed over ranks
    ranks: int = 0                       # ranks that reported this case
    iters: int = 0                       # timed repetitions (after warm-up)
    time_us: Optional[float] = None      # median per-call time; the slowest rank's median
    algbw_gbps: Optional[float] = None   # size_bytes / time, GB/s (1e9)
    busbw_gbps: Optional[float] = None   # algbw * bus_factor
    bus_factor: Optional[float] = None   # 2(n-1)/n all_reduce; (n-1)/n all_gather, reduce_scatter, all_to_all; 1
    error: Optional[str] = None


class CollectiveFault(ProfileModel):
    rank: Optional[int] = None           # the rank at fault; None when no single rank could be named
    kind: FaultKind
    detail: str
    culprit: bool = True                 # False: a consequence seen by a healthy rank


class CollectivesSection(ProfileModel):
    status: Literal["pass", "fail"]
    world_size: int
    nnodes: int = 1
    launch: Literal["fork", "spawn", "torchrun"]
    backend: str
    backend_reason: str
    device_type: str                     # where the ranks' buffers live
    dtypes: list[str] = []
    timeout_s: float
    seconds: float
    cases_planned: int = 0
    cases: list[CollectiveCaseRecord] = []
    faults: list[CollectiveFault] = []
    detected_after_s: Optional[float] = None   # seconds without progress when the first fault was seen
