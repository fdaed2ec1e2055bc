"""Last-level cache size discovery and a cache flusher.

CPU: the largest cache level under /sys/devices/system/cpu/cpu0/cache (Linux), else `lscpu -B`.
Accelerators: DeviceInfo.extra["l2_cache_bytes"] / ["llc_bytes"] when the backend reports it, else
torch's device properties `L2_cache_size` (CUDA/ROCm builds).
Fallback when nothing answers: 256 MiB — at least the largest last-level cache of the devices in
peaks.yaml (MI300X's 256 MB Infinity Cache), so "several times the LLC" stays true, at the cost of
larger arrays on small devices (callers cap arrays by free memory).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bringup.backends.host import is_host

FALLBACK_LLC_BYTES = 256 * 2**20
SYSFS_CPU0_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


@dataclass(frozen=True)
class CacheSize:
    bytes: int
    source: str  # where the number came from, for the record


def parse_size(text: str) -> int | None:
    """'32768K', '32 MiB', '1024 KB', '2097152' -> bytes."""
    match = re.match(r"^\s*([\d.]+)\s*([KMGT]?)(i?B)?\s*$", text.strip(), re.IGNORECASE)
    if not match:
        return None
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)


def cpu_llc_from_sysfs(root: Path = SYSFS_CPU0_CACHE) -> int | None:
    """Size of the highest-level data/unified cache listed in sysfs, or None."""
    best: tuple[int, int] | None = None
    for index in sorted(root.glob("index*")):
        try:
            level = int((index / "level").read_text().strip())
            kind = (index / "type").read_text().strip()
            size = parse_size((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind == "Instruction" or size is None:
            continue
        if best is None or level > best[0] or (level == best[0] and size > best[1]):
            best = (level, size)
    return best[1] if best else None


def cpu_llc_from_lscpu() -> int | None:
    """Largest cache reported by `lscpu -C=NAME,ONE-SIZE -B` (per instance, bytes), or None."""
    if shutil.which("lscpu") is None:
        return None
    try:
        out = subprocess.run(["lscpu", "-C=NAME,ONE-SIZE", "-B"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    sizes = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and not parts[0].upper().endswith("I") and parts[1].isdigit():
            sizes.append(int(parts[1]))
    return max(sizes) if sizes else None


def llc_size(device: torch.device, extra: dict[str, Any] | None = None) -> CacheSize:
    """Last-level cache size of `device`, with the source of the number."""
    extra = extra or {}
    for key in ("llc_bytes", "l2_cache_bytes", "l2_cache_size"):
        if isinstance(extra.get(key), int) and extra[key] > 0:
            return CacheSize(extra[key], f"device info extra[{key}]")
    if is_host(device):
        found = cpu_llc_from_sysfs()
        if found:
            return CacheSize(found, str(SYSFS_CPU0_CACHE))
        found = cpu_llc_from_lscpu()
        if found:
            return CacheSize(found, "lscpu")
    else:
        module = getattr(torch, device.type, None)
        try:
            props = module.get_device_properties(device) if module is not None else None
            l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        except Exception:  # a backend without device properties: fall through to the fallback
            l2 = 0
        if l2 > 0:
            return CacheSize(l2, f"torch.{device.type}.get_device_properties().L2_cache_size")
    return CacheSize(FALLBACK_LLC_BYTES, "fallback 256 MiB (no cache size reported)")


class CacheFlusher:
    """Evicts the last-level cache by reading and writing a buffer larger than it."""

    def __init__(self, device: torch.device, nbytes: int) -> None:
        self.nbytes = nbytes
        self.buffer = torch.zeros(max(1, nbytes // 4), dtype=torch.float32, device=device)

    def __call__(self) -> None:
        self.buffer.add_(1.0)  # read-modify-write: plain stores may bypass the cache
