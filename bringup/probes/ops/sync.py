"""Wait for a device to finish (op timings and guard checks must see completed work)."""

from __future__ import annotations

import torch

from bringup.backends.host import is_host
from bringup.backends.registry import synchronize as backend_synchronize


def synchronize(device: torch.device) -> None:
    if not is_host(device):  # the CPU runs eagerly: nothing to wait for, and this is the hot path
        backend_synchronize(device)
