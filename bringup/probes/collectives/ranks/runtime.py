"""Per-rank runtime helpers shared by the spawned workers and torchrun mode."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist

from bringup.backends.host import HOST, is_host


def device_for_rank(device_type: str, local_rank: int) -> torch.device:
    """CPU ranks share the CPU; accelerator ranks get one device each, by local rank."""
    if is_host(device_type):
        return HOST
    device = torch.device(device_type, local_rank)
    module = getattr(torch, device_type, None)
    set_device = getattr(module, "set_device", None)
    if set_device is not None:
        set_device(device)
    return device


def make_synchronize(device: torch.device) -> Callable[[], None]:
    """A no-argument device sync (a no-op on the CPU, where collectives return when done)."""
    if is_host(device):
        return lambda: None
    from bringup.backends.registry import synchronize

    return lambda: synchronize(device)


def works_on_host(backend: str, device: torch.device) -> bool:
    """Whether the ranks' collectives run on the host's cores: host ranks, and device ranks whose buffers are
    staged through the host. Those ranks share the host, so each takes its share of the intra-op threads (the
    staged copies with every core each left a 1 MiB all_reduce 10x slower than with one: the threads spun while
    gloo waited for a core)."""
    from bringup.probes.collectives.staging.group import BACKEND_NAME

    return is_host(device) or backend == BACKEND_NAME


def prepare_backend(backend: str, device_type: str) -> None:
    """Before joining: register bringup's host-staged group when the plan uses it (torch knows the others)."""
    from bringup.probes.collectives.staging.group import BACKEND_NAME, register

    if backend == BACKEND_NAME:
        register(device_type)


def monitor_group(backend: str) -> dist.ProcessGroup | None:
    """A gloo group for monitored_barrier (gloo only); None means the default group is already gloo."""
    if backend == "gloo":
        return None
    return dist.new_group(backend="gloo")
