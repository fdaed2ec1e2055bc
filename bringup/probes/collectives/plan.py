"""What a run checks: ops x dtypes x sizes, repetitions and the timeout -- identical on every rank."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from bringup.probes.collectives.ops import OP_NAMES

LARGE_CASE_BYTES = 2 * 1024**2


@dataclass(frozen=True)
class CaseSpec:
    index: int
    op: str
    dtype: str          # "-" for the barrier
    size_bytes: int     # requested size; the op adjusts the element count (see ops.element_count)


@dataclass
class Plan:
    backend: str
    device_type: str                     # torch device type each rank puts its buffers on
    ops: list[str] = field(default_factory=lambda: list(OP_NAMES))
    dtypes: list[str] = field(default_factory=lambda: ["float32"])
    sizes: list[int] = field(default_factory=lambda: [4])
    warmup: int = 2
    iters: int = 10
    timeout_s: float = 60.0

    def cases(self) -> list[CaseSpec]:
        """Barrier first (the cheapest proof that every rank is there), then op x dtype x size."""
        cases: list[CaseSpec] = []
        if "barrier" in self.ops:
            cases.append(CaseSpec(0, "barrier", "-", 0))
        for op in (o for o in self.ops if o != "barrier"):
            for dtype in self.dtypes:
                for size in self.sizes:
                    cases.append(CaseSpec(len(cases), op, dtype, size))
        return cases

    def repetitions(self, size_bytes: int) -> tuple[int, int]:
        """(warm-up, timed) repetitions: fewer for big messages, which are slow and steady anyway.
        A pure function of the size, so every rank runs the same number of collectives."""
        if size_bytes <= LARGE_CASE_BYTES:
            return self.warmup, self.iters
        scaled = self.iters * LARGE_CASE_BYTES // size_bytes
        return min(self.warmup, 1), min(self.iters, max(3, scaled))

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls(**json.loads(text))
