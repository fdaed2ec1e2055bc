"""Test-only catalog plugin (BRINGUP_OPS_PLUGINS=tests.probes.ops.first_bin_searchsorted): a CPU searchsorted with an
off-by-one at the first bin, so an inverse-CDF sampler never returns index 0 and gives its probability to index 1.
The result is a plausible token id every time; only the distribution is wrong."""

from __future__ import annotations

import warnings

import torch

_library = torch.library.Library("aten", "IMPL")


def _first_bin_off_by_one(sorted_sequence: torch.Tensor, values: torch.Tensor, out_int32: bool = False,
                          right: bool = False, side: str | None = None, sorter: torch.Tensor | None = None
                          ) -> torch.Tensor:
    right = right or side == "right"
    below = sorted_sequence.unsqueeze(-2) <= values.unsqueeze(-1) if right else \
        sorted_sequence.unsqueeze(-2) < values.unsqueeze(-1)
    index = below.sum(dim=-1)
    return index.clamp(min=1).to(torch.int32 if out_int32 else torch.int64)


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the point
    _library.impl("searchsorted.Tensor", _first_bin_off_by_one, "CPU")
