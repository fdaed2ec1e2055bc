"""verify-ops, compiled, bench, selftest, collectives, soak and stage stamps as checks."""

from bringup.profiles.schema import Profile
from bringup.profiles.sections.bench import BenchSection, RecordStatus
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
from bringup.profiles.sections.selftest import SelftestSection
from bringup.profiles.verdict.checks import Check, CheckResult
from bringup.profiles.verdict.consequence import off_hot_path

READINESS_LEVEL = 1  # `bringup all --level 1` probes only some checks, by design (cli/run_levels.py, which this
# layer cannot import)
RUN_STAGE = "stages"  # the checks of stage stamps: a skip there is a stage not run in full at the readiness level

BENCH_RECORD_RESULT: dict[RecordStatus, CheckResult] = {"ok": "pass", "error": "warn", "skipped": "skip",
                                                        "not_applicable": "skip"}


def declared_absent(declared: dict[str, str], *check_ids: str) -> str | None:
    """The backend's reason a capability does not apply here, for the first of `check_ids` it declares."""
    return next((declared[c] for c in check_ids if c in declared), None)


def not_applicable_of(profile: Profile) -> dict[str, str]:
    return profile.capabilities.not_applicable if profile.capabilities else {}


def op_checks(profile: Profile) -> list[Check]:
    return op_record_checks(profile.ops, not_applicable_of(profile))


def op_record_checks(records: list[OpCaseRecord], declared: dict[str, str]) -> list[Check]:
    """One check per op case, in order; `declared` is the backend's not-applicable facts (skip, not warn). A failing
    case fails the verdict on the plan's hot path and warns off it, saying why it is off."""
    checks: list[Check] = []
    for r in records:
        name = f"{r.op}[{r.dtype}] {r.case}"
        if r.status == "pass":
            checks.append(Check("verify-ops", name, "pass", "within the error bound, unbiased, of the float64 "
                                "reference"))
        elif r.failing:
            off = off_hot_path(r.op, r.dtype)
            result: CheckResult = "warn" if off else "fail"
            where = f"off the hot path ({off}): " if off else ""
            checks.append(Check("verify-ops", name, result, f"{where}{r.status}: {r.message or 'no message recorded'}"))
        else:
            absent = declared_absent(declared, f"ops.{r.op}", f"attention.{r.op}", f"dtypes.{r.dtype}")
            result = "skip" if absent else "warn"
            reason = f"not applicable: {absent}" if absent else f"unsupported: {r.message or 'the op rejected it'}"
            checks.append(Check("verify-ops", name, result, reason))
    return checks


def compiled_checks(profile: Profile) -> list[Check]:
    return compiled_record_checks(profile.compiled)


def compiled_record_checks(records: list[CompiledRecord]) -> list[Check]:
    """One check per eager-vs-compiled comparison, in order."""
    checks: list[Check] = []
    for r in records:
        name = f"{r.target}[{r.dtype}] {r.backend}" + (f" {r.case}" if r.case else "")
        if r.status == "pass":
            checks.append(Check("compiled", name, "pass", "compiled result as accurate as eager"))
        elif r.status == "mismatch":
            checks.append(Check("compiled", name, "fail", f"compiled result worse than eager "
                                f"(first failing rung: {r.failing_backend or 'unknown'})"))
        elif r.status == "unsupported":
            checks.append(Check("compiled", name, "warn", f"unsupported: {r.message or 'not compiled'}"))
        else:  # a compile error leaves the eager path, which the plan falls back to
            checks.append(Check("compiled", name, "warn", f"{r.status}: {r.message or 'no message recorded'}; "
                                "the runner stays eager for it"))
    return checks


def bench_checks(bench: BenchSection | None) -> list[Check]:
    checks: list[Check] = []
    for name, group in (bench.groups.items() if bench else []):
        errors = [r for r in group.records if BENCH_RECORD_RESULT[r.status] == "warn"]
        if group.status == "not_applicable":
            checks.append(Check("bench", name, "skip", group.reason or "not applicable: no such path here"))
        elif group.status == "skipped":
            checks.append(Check("bench", name, "skip", f"not run: {group.reason or 'skipped'}"))
        elif errors:
            checks.append(Check("bench", name, "warn", f"{len(errors)} measurement(s) raised, e.g. "
                                f"{errors[0].key}: {errors[0].reason or 'error'}"))
        else:
            checks.append(Check("bench", name, "pass", f"{sum(r.status == 'ok' for r in group.records)} measured"))
    return checks


def run_checks(profile: Profile) -> list[Check]:
    """Selftest, collectives and soak as one check each; a partial stage as a warning to rerun it."""
    checks = selftest_checks(profile.selftest)
    if profile.collectives:
        c = profile.collectives
        checks.append(Check("collectives", c.backend, c.status, f"{sum(x.status == 'pass' for x in c.cases)} "
                            f"of {len(c.cases)} cases pass, {len(c.faults)} fault(s)"))
    if profile.soak:
        checks.append(Check("soak", "soak", profile.soak.status, "wrong results in some round"
                            if profile.soak.status == "fail" else "every round matched"))
    for stage, stamp in profile.stages.items():
        if stamp.status == "partial":
            checks.append(partial_stage_check(stage, stamp.level))
    return checks


def partial_stage_check(stage: str, level: int | None) -> Check:
    """A stage left partial: by design at the readiness level (skip: the rest is not run there), else a warning
    (interrupted, or a subset chosen by hand)."""
    if level == READINESS_LEVEL:
        return Check(RUN_STAGE, stage, "skip", f"not run at level {level}: {stage} runs a subset of its checks "
                     f"there by design (`bringup {stage}` or `bringup all` runs the rest)")
    return Check(RUN_STAGE, stage, "warn", f"{stage} is partial: run `bringup {stage}` to finish it")


def selftest_checks(selftest: SelftestSection | None) -> list[Check]:
    if selftest is None:
        return []
    figures = (f"max_abs_err {selftest.max_abs_err:.3g} (threshold {selftest.threshold:.3g}), "
               f"top-1 {selftest.top1_agreement:.0%}")
    return [Check("selftest", selftest.model, selftest.status,
                  figures + (f": {selftest.reason}" if selftest.reason else ""))]
