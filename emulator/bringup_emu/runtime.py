"""The loaded extension and the active spec of this process (set once by the autoload hook)."""

from __future__ import annotations

from types import ModuleType

from bringup_emu.spec import EmuSpec

_extension: ModuleType | None = None
_spec: EmuSpec | None = None


class NotActiveError(RuntimeError):
    """The emulated device is not active in this process."""


def activate(extension: ModuleType, spec: EmuSpec) -> None:
    global _extension, _spec
    _extension, _spec = extension, spec


def is_active() -> bool:
    return _extension is not None


def extension() -> ModuleType:
    if _extension is None:
        raise NotActiveError(
            "emu: the emulated device is not active in this process; set BRINGUP_EMU_SPEC (e.g. to 'default') "
            "before starting Python, with the bringup-emu package installed"
        )
    return _extension


def spec() -> EmuSpec:
    extension()
    assert _spec is not None
    return _spec
