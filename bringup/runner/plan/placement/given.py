"""The placement's command-line inputs read: --device-memory caps (DEVICE=SIZE,...), --layer-split
proportions and the --placement mode. Each mistake is a ValueError of one line naming the item."""

from __future__ import annotations

import math
import re

from bringup.runner.plan.placement.placement import PLACEMENT_MODES

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def memory_caps(text: str | None) -> dict[str, int]:
    caps: dict[str, int] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        device, sep, size = item.partition("=")
        if not sep or not device.strip():
            raise ValueError(f"--device-memory {item.strip()!r} is not DEVICE=SIZE (e.g. emu:1=2GiB)")
        caps[device.strip()] = _size(size.strip(), item.strip())
    return caps


def _size(text: str, item: str) -> int:
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"--device-memory {item!r}: {text!r} is not a size (bytes, or e.g. 512MiB, 2GiB)")
    value = float(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if not 1 <= value < 1 << 60:
        raise ValueError(f"--device-memory {item!r}: the size must be at least 1 byte and below 1 EiB")
    return int(value)


def split_proportions(text: str | None) -> list[float] | None:
    if text is None:
        return None
    proportions = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise ValueError(f"--layer-split {text!r}: {item.strip()!r} is not a number; give P1,P2,... "
                             "in the order of --device") from None
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"--layer-split {text!r}: {item.strip()!r} must be a finite number, 0 or more")
        proportions.append(value)
    return proportions


def placement_mode(text: str | None) -> str:
    """--placement's mode (auto, single, split, replicas) as the planner spells it."""
    mode = PLACEMENT_MODES.get((text or "auto").strip().lower())
    if mode is None:
        raise ValueError(f"--placement {text!r} is not a placement mode; use one of {', '.join(PLACEMENT_MODES)}")
    return mode
