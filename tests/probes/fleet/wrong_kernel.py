"""Fleet fault plugin (tests only): this rank's float32 CPU softmax (aten::_softmax) is 1 % off.

Imported by one rank through BRINGUP_FLEET_FAULTS=R=tests.probes.fleet.wrong_kernel. Other dtypes --
float64, the reference verify-ops compares against -- stay exact (computed from exp and sum, other aten ops),
so the wrong float32 numbers are caught like a real miscomputing kernel would be.
"""

from __future__ import annotations

import warnings

import torch

ERROR = 1.01


def wrong_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    shifted = (x - x.amax(dim=dim, keepdim=True)).exp()
    result = shifted / shifted.sum(dim=dim, keepdim=True)
    return result * ERROR if x.dtype == torch.float32 else result


LIBRARY = torch.library.Library("aten", "IMPL")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    LIBRARY.impl("_softmax", wrong_softmax, "CPU")
