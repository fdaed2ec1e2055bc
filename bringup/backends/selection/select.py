"""Device selection: --device > BRINGUP_DEVICE > the profile's device > automatic. Always says why."""

import os
from dataclasses import dataclass
from typing import Literal

import torch

from bringup.backends.base import Backend, DeviceInfo
from bringup.backends.registry import all_backends, backend_for, registered
from bringup.errors import BringupError
from bringup.log import get_logger

log = get_logger("select")

SelectionSource = Literal["flag", "env", "profile", "auto"]
ENV_VAR = "BRINGUP_DEVICE"


@dataclass
class Selection:
    device: torch.device
    info: DeviceInfo
    reason: str
    source: SelectionSource
    others: list[str]


def usable_devices() -> list[DeviceInfo]:
    """Every usable device once (a plugin family on another family's device type lists the same ids)."""
    found: dict[str, DeviceInfo] = {}
    for backend in all_backends():
        for info in backend.devices():
            found.setdefault(info.id, info)
    return list(found.values())


def _backend_named(device_type: str) -> Backend | None:
    try:
        return backend_for(device_type)
    except KeyError:
        return None


def _refuse_inactive_family(text: str, origin: str, usable: str) -> None:
    """A device type torch does not know yet that a bringup backend names (`emu` before BRINGUP_EMU_SPEC is set):
    BringupError with that backend's own reason and what to do."""
    name = text.strip().partition(":")[0]
    backend = next((b for b in registered() if b.family == name), None)
    if backend is None:
        return
    ok, why = backend.build_support().get(backend.family, (True, ""))
    ok, why = (ok, why) if not ok else backend.availability()
    if not ok:
        raise BringupError(f"{origin} {text!r} is not usable: {why} (usable here: {usable})")


def resolve_explicit(text: str, origin: str) -> tuple[DeviceInfo, str | None]:
    """Turn a device string into a usable device, or explain in one line why it can't be used. A bare device type
    (`cuda`, no index) of several devices takes the one the automatic rule prefers among them; the second value
    then says which and why (None where the string named the device)."""
    usable = ", ".join(d.id for d in usable_devices())
    try:
        dev = torch.device(text.strip())
    except (RuntimeError, ValueError):
        _refuse_inactive_family(text, origin, usable)
        raise BringupError(
            f"{origin} {text!r} is not a device torch knows; use a form like cpu, cuda:0, xpu:1, mps "
            f"(usable here: {usable})"
        ) from None
    backend = _backend_named(dev.type)
    if backend is None:
        raise BringupError(f"{origin} {text!r}: bringup has no backend for {dev.type!r} (usable here: {usable})")
    ok, why = backend.availability()
    if not ok:
        raise BringupError(f"{origin} {text!r} is not usable: {why} (usable here: {usable})")
    count = backend.device_count()
    if dev.index is None and count > 1:
        info, why = choose_automatically(backend.devices())
        return info, f"no index: of the {count} {dev.type} devices the automatic rule prefers {info.id}, {why}"
    index = dev.index or 0
    if index >= count:
        raise BringupError(
            f"{origin} {text!r}: index {index} is out of range, torch sees {count} {dev.type} device(s) "
            f"(usable here: {usable})"
        )
    return backend.device_info(index), None


def rank_for_auto(info: DeviceInfo) -> int:
    """Lower is preferred: a discrete accelerator (or one that does not say), then an integrated one, then the
    CPU."""
    if not info.is_accelerator:
        return 2
    return 1 if info.integrated else 0


def kind_of(info: DeviceInfo) -> str:
    """How the automatic rule sees a device, in words."""
    if not info.is_accelerator:
        return "the host"
    return {True: "integrated", False: "discrete"}.get(info.integrated, "of unknown kind (ranked as discrete)")


def choose_automatically(candidates: list[DeviceInfo]) -> tuple[DeviceInfo, str]:
    """The preferred device and why, naming every other accelerator and how it ranked (torch's order breaks
    ties)."""
    best = min(candidates, key=rank_for_auto)
    rank = rank_for_auto(best)
    tied = [d for d in candidates if d.id != best.id and rank_for_auto(d) == rank]
    if rank == 2:
        why = "no accelerator is usable, so the CPU"
    else:
        why = kind_of(best) + (" (no discrete accelerator is usable)" if rank == 1 else "")
        why += ", the first of its kind in torch's enumeration order" if tied else ""
    passed = [f"{d.id} ({d.name}) is {kind_of(d)}" for d in candidates if d.id != best.id and d.is_accelerator]
    return best, "; ".join([why, *passed])


def select_device(requested: str | None, profile_device: str | None = None) -> Selection:
    env_value = os.environ.get(ENV_VAR) or None
    candidates = usable_devices()
    if requested:
        info, note = resolve_explicit(requested, "--device")
        source, reason = "flag", f"--device {requested}" + (f" ({note})" if note else "")
    elif env_value:
        info, note = resolve_explicit(env_value, ENV_VAR)
        source, reason = "env", f"{ENV_VAR}={env_value}" + (f" ({note})" if note else "")
    elif profile_device:
        info, _ = resolve_explicit(profile_device, "the profile's recorded device")
        source, reason = "profile", f"recorded in the profile ({profile_device})"
    else:
        info, reason = choose_automatically(candidates)
        source = "auto"
    others = [d.id for d in candidates if d.id != info.id]
    selection = Selection(torch.device(info.id), info, reason, source, others)  # type: ignore[arg-type]
    log_selection(selection)
    return selection


def log_selection(selection: Selection) -> None:
    others = ", ".join(selection.others) or "none"
    info = selection.info
    message = f"device {info.id} ({info.name}) selected: {selection.reason}; others usable: {others}"
    if selection.source == "auto" and not selection.info.is_accelerator:
        log.warning(message)
    else:
        log.info(message)
