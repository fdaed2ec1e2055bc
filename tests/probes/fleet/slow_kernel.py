"""Fleet fault plugin (tests only): this rank's CPU matmul (aten::mm) does its real work REPEATS times.

Imported by one rank through BRINGUP_FLEET_FAULTS=R=tests.probes.fleet.slow_kernel. The override computes
the true product with the addmm kernel (another aten op on the same BLAS call, so no recursion) REPEATS times
and returns it: the numbers stay right and the rank is about REPEATS times slower at matmul -- real work, not
a sleep, so the slow-down scales with the device like a genuinely slow part would.
"""

from __future__ import annotations

import warnings

import torch

REPEATS = 12


def slow_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = a.new_empty((a.shape[0], b.shape[1]))
    for _ in range(REPEATS):
        torch.addmm(out, a, b, beta=0, out=out)
    return out


LIBRARY = torch.library.Library("aten", "IMPL")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    LIBRARY.impl("mm", slow_mm, "CPU")
