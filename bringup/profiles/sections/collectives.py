"""Profile section written by `bringup verify-collectives`: the world that ran, per-case correctness
(wrong-element counts, summed over ranks) and bandwidth (nccl-tests algbw/busbw), and any faults."""

from typing import Literal, Optional

from bringup.profiles.base_model import ProfileModel

CaseStatus = Literal["pass", "fail", "error", "skipped", "unsupported", "crashed", "timeout"]
FaultKind = Literal["exited", "hung", "startup", "error", "interrupted"]
# where the bytes travel -- device: the device's own collective library on device buffers; host: host buffers (a
# host-only backend, or the host itself); host_staged: device buffers copied to the host, through gloo and back
# on every call (bringup's staged group, for a device with no collective library)
DataPath = Literal["device", "host", "host_staged"]
BANDWIDTH_LABELS: dict[str, str] = {
    "device": "bandwidth in GB/s",
    "host": "bandwidth in GB/s, host buffers",
    "host_staged": "bandwidth in GB/s, host-staged: device -> host -> gloo -> device, copies included",
}


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


class CollectiveFallback(ProfileModel):
    """A fallback the stage took (also logged at WARNING): what it wanted, what it used instead, and why."""

    level: Literal["op", "path", "global"]
    what: str
    wanted: str
    instead: str
    why: str


class CollectivesSection(ProfileModel):
    status: Literal["pass", "fail"]
    world_size: int
    nnodes: int = 1
    launch: Literal["fork", "spawn", "torchrun"]
    backend: str
    backend_reason: str
    device_type: str                     # where the ranks' buffers live
    data_path: Optional[DataPath] = None      # None: recorded before bringup said (then read the backend_reason)
    rank_devices: list[str] = []         # each rank's device, by rank (as the rank reported it)
    fallbacks: list[CollectiveFallback] = []
    dtypes: list[str] = []
    timeout_s: float
    seconds: float
    cases_planned: int = 0
    cases: list[CollectiveCaseRecord] = []
    faults: list[CollectiveFault] = []
    detected_after_s: Optional[float] = None   # seconds without progress when the first fault was seen
