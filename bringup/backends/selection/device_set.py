"""Several devices from one --device value: a comma list (`emu:0,emu:1`, `cuda:0,cpu`), where a bare family name
means all its usable devices. None where the value names one device: the single-device path, as before."""

from __future__ import annotations

import torch

from bringup.backends.base import DeviceInfo
from bringup.backends.selection.select import resolve_explicit, usable_devices
from bringup.errors import BringupError


def device_set(text: str | None, origin: str = "--device") -> list[DeviceInfo] | None:
    if not text:
        return None
    parts = [part.strip() for part in text.split(",")]
    if any(not part for part in parts):
        raise BringupError(f"{origin} {text!r} has an empty item; write a list like emu:0,emu:1 or cuda:0,cpu")
    found: list[DeviceInfo] = []
    for part in parts:
        for info in _named(part, origin):
            if any(info.id == seen.id for seen in found):
                raise BringupError(f"{origin} {text!r} names {info.id} twice; name each device once")
            found.append(info)
    return found if len(found) > 1 else None


def _named(part: str, origin: str) -> list[DeviceInfo]:
    try:
        device = torch.device(part)
    except (RuntimeError, ValueError):
        device = None
    if device is not None and device.index is None:
        family = [d for d in usable_devices() if torch.device(d.id).type == device.type]
        if len(family) > 1:
            return family
    return [resolve_explicit(part, origin)[0]]
