"""Which torch.distributed backend a device family uses, and why -- chosen from what torch reports.

Order: an explicit --backend (must be available); else torch's own default for the device type
(`dist.Backend.default_device_backend_map`, which out-of-tree device plugins extend when they
register, e.g. npu -> hccl); else the family's declared collective library (Backend.collective_libraries);
else -- none declared, or none in this torch build -- gloo with the device's buffers staged through the host
(staging/group.py), recorded as a path fallback: results are still exact, but no device library is tested and
the bandwidth is the host-staged path's.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from bringup.backends.host import HOST_DEVICE_TYPE, is_host
from bringup.backends.registry import registered
from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.probes.collectives.staging.group import BACKEND_NAME as HOST_STAGED
from bringup.profiles.sections.collectives import DataPath

_HOST_ONLY = {"gloo", "mpi"}   # backends whose buffers we keep on the CPU
HOST_STAGED_WHAT = "gloo with the buffers staged through the host"


@dataclass(frozen=True)
class BackendChoice:
    name: str
    reason: str
    device_type: str   # where the buffers live: the device type, or the host's for host-only backends
    data_path: DataPath = "device"


def known_libraries() -> dict[str, tuple[str, str]]:
    """device family -> (torch.distributed backend, what it is), as the backends declare them."""
    found: dict[str, tuple[str, str]] = {}
    for backend in registered():
        found |= {k: v for k, v in backend.collective_libraries.items() if k not in found}
    return found


def _available(name: str) -> bool:
    try:
        return bool(dist.is_available() and dist.is_backend_available(name))
    except (AttributeError, RuntimeError, ValueError):
        return name in getattr(dist.Backend, "backend_list", [])


def _placed(name: str, reason: str, device_type: str) -> BackendChoice:
    """The choice of `name`: host-only backends keep the buffers on the host, the staged group on the device."""
    if name == HOST_STAGED:
        return BackendChoice(name, reason, device_type, "host" if is_host(device_type) else "host_staged")
    if name in _HOST_ONLY or is_host(device_type):
        return BackendChoice(name, reason, HOST_DEVICE_TYPE, "host")
    return BackendChoice(name, reason, device_type, "device")


def choose_backend(requested: str, family: str, device_type: str, fallbacks: FallbackRecorder) -> BackendChoice:
    """Pick the backend for `family`; raises BringupError for an unusable explicit choice."""
    if not dist.is_available():
        raise BringupError("this torch build has no torch.distributed; install a build with distributed support")
    if requested != "auto":
        if requested == HOST_STAGED:  # bringup's own: registered in each rank, so not listed in this process
            if not _available("gloo"):
                raise BringupError(f"backend {HOST_STAGED} needs gloo, which this torch build lacks")
            return _placed(requested, "requested with --backend", device_type)
        if not _available(requested):
            raise BringupError(
                f"backend {requested!r} is not available in this torch build "
                f"(torch.distributed.is_backend_available); use --backend auto or install its plugin")
        return _placed(requested, "requested with --backend", device_type)
    default_map = getattr(dist.Backend, "default_device_backend_map", {}) or {}
    candidates = []
    if device_type in default_map:
        candidates.append((default_map[device_type],
                           f"torch.distributed's default backend for device type {device_type!r}"))
    libraries = known_libraries()
    if family in libraries:
        name, what = libraries[family]
        candidates.append((name, f"the {family} family's collective library: {what}"))
    for name, reason in candidates:
        if _available(name):
            return _placed(name, reason, device_type)
    wanted = candidates[0][0] if candidates else f"a device-native collective library for {family}"
    why = (f"{wanted} is not available in this torch build" if candidates
           else f"neither torch nor bringup's {family} backend names a collective library for device type "
                f"{device_type!r}")
    if not _available("gloo"):
        raise BringupError(f"{why}, and gloo is not available either; no collective backend to test")
    fallbacks.record("path", "collectives backend", wanted, HOST_STAGED_WHAT, why)
    return _placed(HOST_STAGED, f"fallback: {why}; {HOST_STAGED_WHAT} (results exact; no device library is "
                                f"tested; time and bandwidth include the device-host copies)", device_type)
