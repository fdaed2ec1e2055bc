"""Memory checks: what the backend reports, and an allocation that is written and read back."""

from collections.abc import Callable
from typing import Any

import torch

from bringup.backends.registry import backend_for
from bringup.probes.capabilities.result import error_text, supported, unknown, unsupported

ALLOCATION_CAP_BYTES = 256 * 2**20


def reported(device: torch.device) -> tuple[int | None, int | None]:
    return backend_for(device).memory(device.index or 0)


def report(device: torch.device, what: str, value: int) -> dict[str, Any]:
    """The figure as evidence, naming the API the backend read it through where it says."""
    source = backend_for(device).memory_source(device.index or 0)
    through = f" (through {source})" if source else ""
    return supported(f"backend reports {value} bytes {what}{through}", bytes=value, source=source)


def check_total(device: torch.device) -> dict[str, Any]:
    total, _ = reported(device)
    if total is None:
        return unknown("the backend does not report total memory")
    return report(device, "total", total)


def check_free(device: torch.device) -> dict[str, Any]:
    _, free = reported(device)
    if free is None:
        return unknown("the backend does not report free memory")
    return report(device, "free at probe time", free)


def check_allocation(device: torch.device) -> dict[str, Any]:
    _, free = reported(device)
    size = min(ALLOCATION_CAP_BYTES, (free or ALLOCATION_CAP_BYTES * 4) // 4)
    count = size // 4
    try:
        buf = torch.arange(count, dtype=torch.int32, device=device)
        total = int(buf.sum(dtype=torch.int64).item())
        last = int(buf[-1].item())
        del buf
    except Exception as exc:
        return unsupported(f"allocating {size} bytes failed: {error_text(exc)}")
    expected = count * (count - 1) // 2
    if total != expected or last != count - 1:
        return unsupported(f"{size}-byte buffer read back wrong: sum {total} != {expected}")
    return supported(f"allocated, wrote and summed {size} bytes exactly", bytes=size)


def memory_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    return {"total": check_total, "free": check_free, "allocation": check_allocation}
