"""Test-only catalog plugin (BRINGUP_OPS_PLUGINS=tests.probes.ops.poisoned_ops): ops whose kernels return NaN,
infinities, values past the dtype's range or an integer garbage result, against finite float64 references; the
profile must record them as failures without a non-finite number."""

from __future__ import annotations

import math

import torch

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec

OPS = ("test_nan_out", "test_inf_out", "test_huge_out", "test_integer_out")


def _twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def ops() -> list[OpSpec]:
    def one(g: torch.Generator) -> list:
        return [randn(g, 4, 5)]

    def poisoned(name: str, kernel, reference=_twice, role: str = "") -> OpSpec:
        return OpSpec(name, "test", (CaseSpec(one, kernel, ref=reference, role=role or name),), ("float32", "float64"))

    return [
        poisoned(OPS[0], lambda x: x * math.nan, role="NaN out"),
        poisoned(OPS[1], lambda x: x * math.inf, role="infinity out"),
        poisoned(OPS[2], lambda x: x * 1e300, role="past the range"),
        poisoned(OPS[3], lambda x: (x * math.nan).long(), lambda x: (x * 2).long(), role="integer garbage"),
    ]
