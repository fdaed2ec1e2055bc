"""All device families this build of bringup knows, and lookups by device."""

import torch

from bringup.backends.base import Backend, DeviceInfo
from bringup.backends.cpu import CpuBackend
from bringup.backends.cuda import CudaBackend
from bringup.backends.mps import MpsBackend
from bringup.backends.privateuse1 import PrivateUse1Backend, registered_name
from bringup.backends.xpu import XpuBackend


def all_backends() -> list[Backend]:
    backends: list[Backend] = [CudaBackend(), XpuBackend(), MpsBackend()]
    name = registered_name()
    if name is not None:
        backends.append(PrivateUse1Backend(name))
    backends.append(CpuBackend())
    return backends


def backend_for(device: torch.device | str) -> Backend:
    device_type = torch.device(device).type
    for backend in all_backends():
        if backend.torch_device_type == device_type:
            return backend
    raise KeyError(f"no bringup backend handles device type {device_type!r}")


def synchronize(device: torch.device | str) -> None:
    dev = torch.device(device)
    backend_for(dev).synchronize(dev)


def device_info(device: torch.device | str) -> DeviceInfo:
    dev = torch.device(device)
    return backend_for(dev).device_info(dev.index or 0)
