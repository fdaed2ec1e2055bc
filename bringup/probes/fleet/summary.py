"""A rank's key figures and verdicts, taken from its profile -- plain data that gathers, compares and prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from bringup.profiles.schema import Profile
from bringup.profiles.sections.bench import BenchRecord, BenchSection

# environment facts that differ between ranks for reasons of the run, not of the machine
_RUN_FACTS = ("captured", "torch_build.threads")
_RUN_ENV_PREFIXES = ("env.BRINGUP_COLLECTIVES_", "env.BRINGUP_FLEET_", "env.BRINGUP_OPS_PLUGINS")


@dataclass
class StageResult:
    exit_code: int            # 0 ok, 1 the stage found failures, 2 bad input, -1 it raised
    seconds: float
    error: str | None = None


@dataclass
class RankSummary:
    rank: int
    host: str
    device: str
    profile: str                                          # the rank's profile file
    stages: dict[str, StageResult] = field(default_factory=dict)
    figures: dict[str, float] = field(default_factory=dict)      # bench figures, higher is better
    ops: dict[str, str] = field(default_factory=dict)            # 'op[dtype] case' -> status
    capabilities: dict[str, str] = field(default_factory=dict)   # 'group.name' -> status
    facts: dict[str, str] = field(default_factory=dict)          # driver, torch, environment...
    selftest: str | None = None
    links: dict[str, float] = field(default_factory=dict)        # '2->3' -> GB/s (send/recv ping-pong)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RankSummary:
        stages = {k: StageResult(**v) for k, v in (data.get("stages") or {}).items()}
        return cls(**{**data, "stages": stages})


def best_rate(record: BenchRecord, median_rate: float) -> float:
    """The rate of the fastest repetition: contention from other processes only ever slows a repetition,
    so the best one is the device's own speed even on a busy host (the median is what a user would see)."""
    if record.median_s and record.min_s:
        return median_rate * record.median_s / record.min_s
    return median_rate


def bench_figures(bench: BenchSection | None) -> dict[str, float]:
    """The fleet's bench figures (best repetition): float32 square matmul GFLOP/s and triad bandwidth GB/s."""
    figures: dict[str, float] = {}
    if bench is None:
        return figures
    matmul = bench.groups.get("matmul")
    for record in matmul.records if matmul else []:
        if record.status == "ok" and record.tflops and record.dtype == "float32" and "square" in record.key:
            figures[f"matmul {record.key} GFLOP/s"] = round(best_rate(record, record.tflops * 1000), 3)
    bandwidth = bench.groups.get("bandwidth")
    for record in bandwidth.records if bandwidth else []:
        if record.status == "ok" and record.gbps and record.name == "triad":
            figures["triad GB/s"] = round(best_rate(record, record.gbps), 3)
    return figures


def environment_facts(profile: Profile) -> dict[str, str]:
    """Flattened facts that should be the same on every rank: device model, driver, torch, packages, env."""
    facts: dict[str, str] = {}
    if profile.device is not None:
        facts["device.name"] = profile.device.name
        for key in ("arch", "memory_total_bytes"):
            value = getattr(profile.device, key)
            if value is not None:
                facts[f"device.{key}"] = str(value)
    env = profile.environment
    if env is not None:
        for key in ("bringup", "torch", "python", "driver", "os"):
            value = getattr(env, key)
            if value is not None:
                facts[key] = str(value)
        for group in ("runtime", "env", "packages", "torch_build"):
            for key, value in (getattr(env, group) or {}).items():
                facts[f"{group}.{key}"] = "-" if value is None else str(value)
    return {k: v for k, v in facts.items() if k not in _RUN_FACTS and not k.startswith(_RUN_ENV_PREFIXES)}


def summarise(profile: Profile | None, rank: int, host: str, device: str, profile_name: str) -> RankSummary:
    """What the fleet compares of one rank, from its profile (None: nothing recorded yet)."""
    summary = RankSummary(rank=rank, host=host, device=device, profile=profile_name)
    if profile is None:
        return summary
    summary.figures = bench_figures(profile.bench)
    summary.ops = {f"{r.op}[{r.dtype}] {r.case}": r.status for r in profile.ops}
    if profile.capabilities is not None:
        summary.capabilities = {f"{group}.{name}": cap.status
                                for group, caps in profile.capabilities.groups().items() for name, cap in caps.items()}
    summary.facts = environment_facts(profile)
    summary.selftest = profile.selftest.status if profile.selftest is not None else None
    return summary
