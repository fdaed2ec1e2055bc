"""bringup's emulated accelerator: a PrivateUse1 device named `emu`, backed by host memory.

Importing this package is cheap and changes nothing; torch's backend autoload activates the device in a process
started with BRINGUP_EMU_SPEC set. The functions below read the active device's counters.
"""

from __future__ import annotations


def is_active() -> bool:
    """Whether the emu device is registered in this process."""
    from bringup_emu import runtime

    return runtime.is_active()


def fallback_counts() -> dict[str, int]:
    """Calls per op (`aten::name.overload`, or `aten::name` for the unnamed overload) that went through
    at::native::cpu_fallback since the start or the last reset."""
    from bringup_emu import runtime

    return dict(runtime.extension().fallback_counts())


def native_counts() -> dict[str, int]:
    """Calls per op that the boxed kernel ran natively (on aliases of device memory, no host copies)."""
    from bringup_emu import runtime

    return dict(runtime.extension().native_counts())


def reset_fallback_counts() -> None:
    """Zero both counters."""
    from bringup_emu import runtime

    runtime.extension().reset_counts()


def active_spec() -> dict:
    """The active spec as plain data (devices with memory in bytes)."""
    from bringup_emu import runtime

    return runtime.spec().as_dict()
