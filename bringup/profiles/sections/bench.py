"""The profile's `bench` section: baseline microbenchmark results, grouped, with harness settings."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from bringup.profiles.base_model import ProfileModel
from bringup.profiles.sections.ops import RunsOn

RecordStatus = Literal["ok", "skipped", "not_applicable", "error"]
GroupStatus = Literal["measured", "partial", "skipped", "not_applicable"]


class HarnessSettingsModel(ProfileModel):
    """How every measurement of a group was taken (so two runs can be compared fairly)."""

    warmup: int
    min_reps: int
    max_reps: int
    rel_iqr_threshold: float
    budget_s: float
    min_rep_s: float
    flush_cache: bool
    flush_bytes: int | None = None
    sync: str = "bringup.backends.registry.synchronize"


class BenchRecord(ProfileModel):
    """One measurement (or one explicitly skipped measurement, with the reason)."""

    key: str  # unique inside its group; baseline comparison matches on (group, key)
    name: str  # kernel: matmul, triad, h2d_pinned, sdpa_math, an op name, ...
    dtype: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    status: RecordStatus = "ok"
    reason: str | None = None
    verified: bool | None = None  # ops group: False marks an "unverified" case included on request
    # ops group: where the op ran (device, or host_fallback: the figure is the host's plus the copies), from the
    # verify-ops record or the op watched once; None on the host itself
    runs_on: RunsOn | None = None
    runs_on_evidence: str | None = None
    # timing (seconds per call)
    median_s: float | None = None
    iqr_s: float | None = None
    min_s: float | None = None
    reps: int | None = None
    calls_per_rep: int | None = None
    noisy: bool | None = None
    stop: str | None = None  # stable | budget | max_reps
    # work accounting and rates
    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    intensity: float | None = None  # flop per byte
    # roofline: % of the attainable ceiling (datasheet peaks / ceilings measured in this run)
    pct_datasheet: float | None = None
    pct_measured: float | None = None
    bound: Literal["compute", "memory"] | None = None
    # side-by-side: the plain baseline this record is an alternative to, and baseline_time / this_time
    baseline_key: str | None = None
    speedup: float | None = None


class BenchGroup(ProfileModel):
    """One benchmark group's results from one run."""

    status: GroupStatus = "measured"
    reason: str | None = None
    preset: Literal["quick", "full"] = "full"
    finished: str | None = None  # ISO time
    seconds: float | None = None
    settings: HarnessSettingsModel | None = None
    notes: list[str] = Field(default_factory=list)
    records: list[BenchRecord] = Field(default_factory=list)


class MeasuredCeilings(ProfileModel):
    """Best rates this run achieved: the 'measured roofline'."""

    tflops: dict[str, float] = Field(default_factory=dict)  # dtype -> best matmul TFLOP/s
    attention_tflops: dict[str, float] = Field(default_factory=dict)  # dtype -> best attention TFLOP/s
    gbps: float | None = None  # best bandwidth-kernel GB/s
    gbps_kernel: str | None = None


class DatasheetRef(ProfileModel):
    """The bundled datasheet entry matched to this device (bringup/profiles/peaks.yaml)."""

    id: str
    name: str
    source: str
    memory_bandwidth_gbps: float
    dense_tflops: dict[str, float] = Field(default_factory=dict)


class BenchSection(ProfileModel):
    """Results of `bringup bench`: groups (matmul, bandwidth, transfer, dispatch, attention, ops,
    compiled, ...) each with records and the harness settings used, plus the roofline ceilings."""

    groups: dict[str, BenchGroup] = Field(default_factory=dict)
    ceilings: MeasuredCeilings | None = None
    datasheet: DatasheetRef | None = None
    datasheet_reason: str | None = None  # why no datasheet entry applies, when none does

    def records(self, group: str) -> list[BenchRecord]:
        """Records of one group ([] when the group was not run)."""
        found = self.groups.get(group)
        return list(found.records) if found else []

    def find(self, group: str, key: str) -> BenchRecord | None:
        """The record with this key in this group, or None."""
        return next((r for r in self.records(group) if r.key == key), None)
