"""Guard regions: run an op's out= variant into a view of a larger, sentinel-filled buffer."""

from __future__ import annotations

from dataclasses import dataclass

import torch

GUARD_ELEMENTS = 64  # sentinel elements before and after the output view


def sentinel_for(dtype: torch.dtype) -> float | int | bool:
    if dtype == torch.bool:
        return True
    if dtype.is_floating_point:
        return 113.0  # exactly representable in every float dtype, including float8
    return 90  # fits int8 and uint8


@dataclass
class GuardedOutput:
    buffer: torch.Tensor
    view: torch.Tensor
    numel: int

    def touched(self) -> list[str]:
        """Which guard regions no longer hold the sentinel ('before', 'after')."""
        expected = sentinel_for(self.buffer.dtype)
        regions = {
            "before": self.buffer[:GUARD_ELEMENTS],
            "after": self.buffer[GUARD_ELEMENTS + self.numel:],
        }
        return [name for name, region in regions.items()
                if not torch.equal(region, torch.full_like(region, expected))]


def guarded_output(shape: torch.Size, dtype: torch.dtype, device: torch.device) -> GuardedOutput:
    """A contiguous output view of `shape`, with GUARD_ELEMENTS sentinel elements on each side."""
    numel = 1
    for size in shape:
        numel *= size
    buffer = torch.full((numel + 2 * GUARD_ELEMENTS,), sentinel_for(dtype), dtype=dtype, device=device)
    view = buffer[GUARD_ELEMENTS:GUARD_ELEMENTS + numel].view(shape)
    return GuardedOutput(buffer=buffer, view=view, numel=numel)
