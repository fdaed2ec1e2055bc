"""What every benchmark group receives: device, harness, preset, profile, and helpers."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bringup.backends.base import DeviceInfo
from bringup.probes.bench.cache import CacheSize
from bringup.probes.bench.harness import Harness
from bringup.probes.bench.presets import Preset
from bringup.profiles.schema import Profile

FLOAT_DTYPES = ("float64", "float32", "bfloat16", "float16")


@dataclass
class BenchContext:
    device: torch.device
    info: DeviceInfo
    harness: Harness
    preset: Preset
    profile: Profile | None
    llc: CacheSize
    include_unverified: bool = False
    e2e_dtype: str | None = None  # the e2e group's runner dtype (None: the plan's choice)
    model_dir: Path | None = None  # the serve group's model (None: the built-in one)
    on_step: Callable[[str], None] = field(default=lambda _text: None)

    def free_memory_bytes(self) -> int | None:
        """Free device memory now (falls back to the recorded figure)."""
        from bringup.backends.registry import backend_for

        try:
            _total, free = backend_for(self.device).memory(self.device.index or 0)
        except Exception:  # a backend that cannot tell: use what DeviceInfo said
            free = None
        return free if free is not None else self.info.memory_free_bytes

    def memory_budget_bytes(self) -> int | None:
        """How many bytes one measurement's buffers may take (None when memory is unknown)."""
        free = self.free_memory_bytes()
        return int(free * self.preset.memory_fraction) if free else None

    def capability_names(self, group: str) -> dict[str, str] | None:
        """{name: status} of a capabilities group, or None when the profile has no capabilities."""
        if self.profile is None or self.profile.capabilities is None:
            return None
        found = self.profile.capabilities.groups().get(group, {})
        return {name: cap.status for name, cap in found.items()}

    def supported(self, group: str) -> list[str] | None:
        """Names the profile marks `supported` in a capabilities group (None: no capabilities)."""
        names = self.capability_names(group)
        return None if names is None else [n for n, s in names.items() if s == "supported"]
