"""Free device memory under the run's --device-memory cap (a way to rehearse, on a large device, a start that a
smaller one would make)."""

from __future__ import annotations

import torch

from bringup.errors import BringupError
from bringup.runner.engine.options import EngineOptions
from bringup.runner.plan.placement.given import memory_caps


def cap_for(options: EngineOptions, device: torch.device) -> int | None:
    """The --device-memory cap of `device` for this run, if one is given."""
    try:
        return memory_caps(options.device_memory).get(str(device))
    except ValueError as exc:
        raise BringupError(str(exc)) from None


def capped_free(options: EngineOptions, device: torch.device, total: int | None, free: int | None) -> int | None:
    """Free memory under the device's cap: the cap less what is already in use (the device's own figure without
    a cap)."""
    cap = cap_for(options, device)
    if cap is None or free is None:
        return free
    used = (total - free) if total is not None else 0
    return max(0, min(free, cap - used))
