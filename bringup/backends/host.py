"""The host: the one device every process has. References are computed on it, host kernels run in its memory,
and a global fallback lands on it. The only place outside a family's own backend module that names a device."""

import torch

HOST_DEVICE_TYPE = "cpu"
HOST = torch.device(HOST_DEVICE_TYPE)


def is_host(device: torch.device | str) -> bool:
    """Whether `device` (a torch.device, or a device type or string such as "cpu" or "cuda:1") is the host."""
    kind = device.type if isinstance(device, torch.device) else str(device).split(":", 1)[0]
    return kind == HOST_DEVICE_TYPE
