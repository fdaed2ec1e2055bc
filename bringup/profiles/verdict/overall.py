"""All checks of a profile and the one overall line: READY, READY WITH WARNINGS (n), NOT READY (n failures)."""

from dataclasses import dataclass

from bringup.profiles.schema import Profile
from bringup.profiles.verdict.capability_checks import capability_checks
from bringup.profiles.verdict.checks import Check, count_results
from bringup.profiles.verdict.graph_replay import replay_checks
from bringup.profiles.verdict.host_fallback import STAGE as HOST_FALLBACK_STAGE
from bringup.profiles.verdict.host_fallback import host_fallback_checks
from bringup.profiles.verdict.run_checks import RUN_STAGE, bench_checks, compiled_checks, op_checks, run_checks

NAMED_AT_MOST = 3
EXIT_CODES = {"READY": 0, "READY WITH WARNINGS": 0, "NOT READY": 1}


@dataclass(frozen=True)
class Verdict:
    checks: list[Check]

    def of(self, result: str) -> list[Check]:
        return [c for c in self.checks if c.result == result]

    @property
    def status(self) -> str:
        if self.of("fail"):
            return "NOT READY"
        return "READY WITH WARNINGS" if self.of("warn") else "READY"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    def counts(self) -> dict[str, int]:
        return count_results(self.checks)

    def look_at(self) -> list[Check]:
        """What to look at first: the failures, else the warnings."""
        return self.of("fail") or self.of("warn")

    def headline(self) -> str:
        """`NOT READY (2 failures)`, `READY WITH WARNINGS (3)`, `READY`."""
        fails, warns = len(self.of("fail")), len(self.of("warn"))
        if fails:
            return f"NOT READY ({fails} failure{'s' if fails != 1 else ''})"
        return f"READY WITH WARNINGS ({warns})" if warns else "READY"

    def line(self) -> str:
        """The headline and what to look at, e.g. `NOT READY (2 failures): look at verify-ops softmax[float32] …`."""
        named = self.look_at()
        through_host = sorted({c.name for c in self.of("warn") if c.stage == HOST_FALLBACK_STAGE})
        if through_host and not self.of("fail"):  # the warning that costs most speed, named whatever else warns
            named = [c for c in named if c.stage != HOST_FALLBACK_STAGE]
            rest = f"; look at {self._shown(named)}" if named else ""
            return f"{self.headline()}: through the host on the hot path: {', '.join(through_host)}{rest}"
        if not named:
            unrun = [c.name for c in self.of("skip") if c.stage == RUN_STAGE]  # partial by design (run_checks)
            absent = len(self.of("skip")) - len(unrun)
            rest = f"; not run in full at this level: {', '.join(unrun)}" if unrun else ""
            return (f"{self.headline()}: {len(self.of('pass'))} checks pass, {absent} not applicable to this "
                    f"device{rest}")
        return f"{self.headline()}: look at {self._shown(named)}"

    @staticmethod
    def _shown(named: list[Check]) -> str:
        subjects: dict[str, int] = {}
        for check in named:
            subjects[check.subject] = subjects.get(check.subject, 0) + 1
        shown = "; ".join(f"{subject} ({count} cases)" if count > 1 else subject
                          for subject, count in list(subjects.items())[:NAMED_AT_MOST])
        more = f" and {len(subjects) - NAMED_AT_MOST} more" if len(subjects) > NAMED_AT_MOST else ""
        return f"{shown}{more}"

    def to_document(self) -> dict:
        return {"status": self.status, "line": self.line(), "counts": self.counts(),
                "look_at": [c.__dict__ for c in self.look_at()]}


def verdict_of(profile: Profile) -> Verdict:
    checks = [*capability_checks(profile.capabilities, profile.ops), *op_checks(profile),
              *host_fallback_checks(profile.ops), *compiled_checks(profile),
              *replay_checks(profile.graph_replay), *bench_checks(profile.bench),
              *run_checks(profile)]
    if not checks:
        checks.append(Check(RUN_STAGE, "all", "warn", "nothing measured yet: run `bringup all`"))
    return Verdict(checks)
