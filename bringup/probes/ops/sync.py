"""Wait for a device to finish (op timings and guard checks must see completed work)."""

from __future__ import annotations

import torch

from bringup.backends.registry import synchronize as backend_synchronize


def synchronize(device: torch.device) -> None:
    if device.type != "cpu":  # the CPU runs eagerly: nothing to wait for, and this is the hot path
        backend_synchronize(device)
