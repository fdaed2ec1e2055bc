"""Wait for a device to finish (the op timings and guard checks must see completed work)."""

from __future__ import annotations

import torch


def synchronize(device: torch.device) -> None:
    if device.type == "cpu":
        return
    try:
        from bringup.backends.registry import synchronize as backend_sync
    except ImportError:  # foundation not present: fall back to torch's per-family module
        module = getattr(torch, device.type, None)
        if module is not None and hasattr(module, "synchronize"):
            module.synchronize(device)
        return
    backend_sync(device)
