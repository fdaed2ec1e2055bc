"""Conservative reads of a capability profile: missing sections mean "not verified", never "fine"."""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import median
from typing import Any

from bringup.profiles.schema import Profile
from bringup.profiles.sections.ops import HOST_FALLBACK, ON_DEVICE


@dataclass
class OpVerdict:
    """Op cases of some ops at one dtype: how many passed, which failed, and which ran through the host."""

    passed: int
    failed: list[str]
    # op -> the evidence of its first passing case that went through the host (the backend's CPU fallback)
    host_fallback: dict[str, str] = field(default_factory=dict)
    on_device: int = 0  # passed cases recorded running on the device (runs_on device)

    @property
    def verified(self) -> bool:
        return self.passed > 0 and not self.failed

    @property
    def falls_back(self) -> bool:
        """Some of these ops' cases passed by running on the host, not on the device (runs_on host_fallback)."""
        return bool(self.host_fallback)

    def fallback_notes(self) -> str:
        """'rms_norm: aten::rsqrt.out copied arguments to the host (...)', one per op that falls back."""
        return "; ".join(f"{op}: {evidence}" for op, evidence in self.host_fallback.items())

    def describe(self) -> str:
        if self.failed:
            return f"{len(self.failed)} op case(s) failed ({', '.join(self.failed[:3])})"
        return f"{self.passed} op case(s) passed" if self.passed else "no op cases recorded"


class ProfileFacts:
    def __init__(self, profile: Profile | None) -> None:
        self.profile = profile

    def capability(self, group: str, name: str, dtype: str | None = None) -> tuple[str, str]:
        """(status, evidence-or-reason); 'unknown' when the profile does not say. With `dtype`, a
        capability whose details list per-dtype results counts only if that dtype passed."""
        caps = self.profile.capabilities if self.profile else None
        cap = caps.groups().get(group, {}).get(name) if caps else None
        if cap is None:
            return "unknown", f"capabilities.{group}.{name} not in the profile"
        per_dtype = cap.details.get("dtypes") if isinstance(cap.details, dict) else None
        if cap.status == "supported" and dtype and isinstance(per_dtype, dict):
            result = str(per_dtype.get(dtype, "not checked"))
            if not result.startswith("pass"):
                return "unsupported", f"at {dtype}: {result}"
        return cap.status, cap.evidence or cap.reason or ""

    def ops(self, dtype: str, names: set[str]) -> OpVerdict:
        records = [r for r in (self.profile.ops if self.profile else []) if r.dtype == dtype and r.op in names]
        failed = [f"{r.op} {r.case}: {r.status}" for r in records if r.status != "pass"]
        passed = [r for r in records if r.status == "pass"]
        host: dict[str, str] = {}
        for r in passed:
            if r.runs_on == HOST_FALLBACK:
                host.setdefault(r.op, r.runs_on_evidence or "verify-ops recorded it running on the host")
        return OpVerdict(passed=len(passed), failed=failed, host_fallback=host,
                         on_device=sum(r.runs_on == ON_DEVICE for r in passed))

    def compiled(self, dtype: str, backend: str) -> tuple[list[Any], list[Any]]:
        """(passing, failing) compiled records of this dtype and backend."""
        records = [r for r in (self.profile.compiled if self.profile else [])
                   if r.dtype == dtype and r.backend == backend]
        return [r for r in records if r.status == "pass"], [r for r in records if r.status != "pass"]

    def bench_records(self, group: str) -> list[dict[str, Any]]:
        """Records of one bench group as plain dicts ([] without a bench section or group)."""
        bench = self.profile.bench if self.profile else None
        if bench is None:
            return []
        found = bench.model_dump().get("groups", {}).get(group)
        if isinstance(found, dict):
            found = found.get("records", [])
        return [r for r in (found or []) if isinstance(r, dict) and r.get("status", "ok") == "ok"]

    def e2e_compiled_decode_speedup(self) -> float | None:
        """Eager time / compiled time of the runner's own decode in bench e2e (None when not measured)."""
        decode = next((r for r in self.bench_records("e2e") if r.get("key") == "decode_b1"), None)
        return decode.get("speedup") if decode else None

    def bench_tflops(self, dtype: str) -> float | None:
        """Best measured matmul TFLOP/s for a dtype (bench ceilings, else the matmul group)."""
        bench = self.profile.bench if self.profile else None
        ceilings = (bench.model_dump().get("ceilings") or {}) if bench else {}
        if ceilings.get("tflops", {}).get(dtype):
            return float(ceilings["tflops"][dtype])
        rates = [r["tflops"] for r in self.bench_records("matmul") if r.get("dtype") == dtype and r.get("tflops")]
        return max(rates) if rates else None

    def linear_vs_matmul_speedup(self, dtype: str) -> tuple[float, int] | None:
        """Median speed-up of F.linear[out,in] over x @ W[in,out] for decode GEMMs, and how many."""
        speedups = [r["speedup"] for r in self.bench_records("matmul")
                    if r.get("name") == "linear" and r.get("dtype") == dtype and r.get("speedup")]
        return (median(speedups), len(speedups)) if speedups else None
