"""Which differences between two profiles fail a `profile diff` (exit 1): the sections named by --fail-on."""

from __future__ import annotations

from bringup.errors import BringupError
from bringup.profiles.diff import Change

# section -> what counts as failing: any change, or a verdict that left "pass", or a measurement slower beyond noise
GATES: dict[str, str] = {
    "capabilities": "any capability status that differs",
    "ops": "any op case that passed before and does not now (fail, error, crashed, timeout, unsupported or gone)",
    "compiled": "any compiled check that passed before and does not now",
    "bench": "any measurement slower beyond both runs' noise",
    "device": "any device field that differs",
    "environment": "any environment field that differs",
}
DEFAULT_GATES = "capabilities"
NO_GATE = "none"


def parse_gates(text: str) -> list[str]:
    """`capabilities,ops` -> ["capabilities", "ops"]; `none` -> []; anything else is a one-line error."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if names == [NO_GATE]:
        return []
    unknown = [name for name in names if name not in GATES]
    if unknown or not names:
        raise BringupError(f"--fail-on {text!r}: {'unknown section ' + repr(unknown[0]) if unknown else 'empty'}; "
                           f"give a comma-separated list of {', '.join(GATES)}, or {NO_GATE}")
    return names


def fails(change: Change) -> bool:
    if change.section in ("ops", "compiled"):
        return change.before == "pass" and change.after != "pass"
    if change.section == "bench":
        return change.note.startswith("slower")
    return True


def failing_changes(changes: list[Change], gates: list[str]) -> list[Change]:
    """The changes in the gated sections that fail the diff."""
    return [c for c in changes if c.section in gates and fails(c)]
