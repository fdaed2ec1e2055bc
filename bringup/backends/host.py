"""The host: the one device every process has. References are computed on it, host kernels run in its memory,
and a global fallback lands on it. The only place outside a family's own backend module that names a device.
Torch-free at import (`--help` of the commands that import it must stay light); HOST is made on first use."""

from typing import Any

HOST_DEVICE_TYPE = "cpu"


def is_host(device: Any) -> bool:
    """Whether `device` (a torch.device, or a device type or string such as "cpu" or "cuda:1") is the host."""
    kind = getattr(device, "type", None)
    if not isinstance(kind, str):
        kind = str(device).split(":", 1)[0]
    return kind == HOST_DEVICE_TYPE


def __getattr__(name: str) -> Any:
    if name == "HOST":  # torch.device("cpu"), imported lazily
        import torch

        return torch.device(HOST_DEVICE_TYPE)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
