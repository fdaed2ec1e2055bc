"""Probe capabilities as checks: supported passes, what the backend declares absent is skipped, the rest warns."""

from bringup.profiles.schema import Capabilities
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.verdict.checks import Check, CheckResult


def capability_result(status: str, declared_absent: bool) -> CheckResult:
    """supported passes; unsupported where the backend declares the thing absent is skipped; the rest warns."""
    if status == "supported":
        return "pass"
    return "skip" if declared_absent and status == "unsupported" else "warn"


def passing_ops_in(dtype: str, ops: list[OpCaseRecord]) -> list[str]:
    return sorted({r.op for r in ops if r.dtype == dtype and r.status == "pass"})


def contradiction_note(dtype: str, ops: list[OpCaseRecord]) -> str:
    """Why a dtype the probe calls unsupported still has passing op cases (e.g. cast and _scaled_mm in fp8)."""
    passing = passing_ops_in(dtype, ops)
    if not passing:
        return ""
    named = ", ".join(passing[:4]) + (f" and {len(passing) - 4} more" if len(passing) > 4 else "")
    return (f"; yet {named} pass in {dtype}: the dtype is stored, converted and used by those ops here, "
            "while general arithmetic in it does not run")


def capability_checks(capabilities: Capabilities | None, ops: list[OpCaseRecord]) -> list[Check]:
    if capabilities is None:
        return []
    checks: list[Check] = []
    for group, entries in capabilities.groups().items():
        for name, capability in entries.items():
            check_id = f"{group}.{name}"
            declared = capabilities.not_applicable.get(check_id)
            result = capability_result(capability.status, declared is not None)
            if result == "pass":
                checks.append(Check("probe", check_id, "pass", capability.evidence or "supported"))
                continue
            why = capability.reason or capability.status
            if group == "dtypes":
                why += contradiction_note(name, ops)
            skipped = result == "skip"
            reason = f"not applicable: {declared}; measured: {why}" if skipped else f"{capability.status}: {why}"
            checks.append(Check("probe", check_id, result, reason))
    return checks
