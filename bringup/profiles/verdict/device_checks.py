"""`bringup devices` as checks: each device torch can use passes; an accelerator the OS has but torch cannot use
warns (the one you meant may be among them), unless nothing could drive it here or a visibility variable hides it
on purpose: not applicable to this run, skipped.

Plain data in, as the inventory gives it: the verdict module imports no probe."""

from bringup.profiles.verdict.checks import Check

HIDDEN_ON_PURPOSE = "hidden by "


def usable_device_check(device_id: str, name: str) -> Check:
    return Check("devices", device_id, "pass", f"torch can use it: {name}")


def unusable_device_check(address: str, what: str, family: str | None, reason: str) -> Check:
    """A PCI display/accelerator torch does not enumerate; `family` None when no backend drives its vendor."""
    name = f"{address} {what}"
    if family is None:
        return Check("devices", name, "skip", f"not applicable, not usable by torch: {reason}")
    if reason.startswith(HIDDEN_ON_PURPOSE):
        return Check("devices", name, "skip", f"not applicable to this run, not usable by torch: {reason}")
    return Check("devices", name, "warn", f"not usable by torch here: {reason}")
