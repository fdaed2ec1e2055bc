"""One check's outcome, as the verdict counts it."""

from dataclasses import dataclass
from typing import Literal

CheckResult = Literal["pass", "warn", "fail", "skip"]
RESULTS: tuple[CheckResult, ...] = ("pass", "warn", "fail", "skip")


@dataclass(frozen=True)
class Check:
    """`skip` is "not applicable to this device" from the backend's declared facts, never a failure."""

    stage: str   # probe, verify-ops, compiled, graphs, bench, selftest, collectives, soak, stages
    name: str    # e.g. dtypes.bfloat16, softmax[float32] odd [3,37,101]
    result: CheckResult
    reason: str

    @property
    def subject(self) -> str:
        """What a person looks at: `verify-ops softmax[float32]` for all of that op's failing cases."""
        return f"{self.stage} {self.name.split(' ', 1)[0]}"


def count_results(checks: list[Check]) -> dict[str, int]:
    """`{"pass": 312, "warn": 2, "fail": 0, "skip": 47}`: every result, zeros included."""
    return {result: sum(c.result == result for c in checks) for result in RESULTS}
