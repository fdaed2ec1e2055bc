"""Which torch.distributed backend a device family uses, and why -- chosen from what torch reports.

Order: an explicit --backend (must be available); else torch's own default for the device type
(`dist.Backend.default_device_backend_map`, which out-of-tree device plugins extend when they
register, e.g. npu -> hccl); else the family's known collective library; else gloo on CPU tensors,
recorded as a path fallback (the device's own library is then *not* tested).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch.distributed as dist

from bringup.backends.registry import registered
from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder

_HOST_ONLY = {"gloo", "mpi"}   # backends whose buffers we keep on the CPU


@dataclass(frozen=True)
class BackendChoice:
    name: str
    reason: str
    device_type: str   # where the buffers live: the device type, or "cpu" for host-only backends


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


def _buffers_on(name: str, device_type: str) -> str:
    return "cpu" if name in _HOST_ONLY else device_type


def choose_backend(requested: str, family: str, device_type: str, fallbacks: FallbackRecorder) -> BackendChoice:
    """Pick the backend for `family`; raises BringupError for an unusable explicit choice."""
    if not dist.is_available():
        raise BringupError("this torch build has no torch.distributed; install a build with distributed support")
    if requested != "auto":
        if not _available(requested):
            raise BringupError(
                f"backend {requested!r} is not available in this torch build "
                f"(torch.distributed.is_backend_available); use --backend auto or install its plugin")
        return BackendChoice(requested, "requested with --backend", _buffers_on(requested, device_type))
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
            return BackendChoice(name, reason, _buffers_on(name, device_type))
    wanted = candidates[0][0] if candidates else f"a collective library for {family}"
    why = (f"{wanted} is not available in this torch build" if candidates
           else f"torch names no collective backend for device type {device_type!r}")
    fallbacks.record("path", "collectives backend", wanted, "gloo on CPU tensors", why)
    if not _available("gloo"):
        raise BringupError(f"{why}, and gloo is not available either; no collective backend to test")
    return BackendChoice("gloo", f"fallback: {why}; gloo on CPU tensors (the device's library is not tested)",
                         "cpu")
