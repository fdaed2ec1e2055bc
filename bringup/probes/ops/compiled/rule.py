"""The eager-vs-compiled acceptance rule (the one torch._dynamo.utils.same uses with an fp64 reference)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from bringup.probes.ops.judge.metrics import flatten_outputs
from bringup.probes.ops.judge.tolerances import row_for

SMALL_TENSOR_NUMEL = 10


def rmse(result: Any, reference: Any) -> float:
    """Root-mean-square error against the float64 reference over all outputs (NaN/Inf -> inf)."""
    outs, refs = flatten_outputs(result), flatten_outputs(reference)
    if len(outs) != len(refs):
        return math.inf
    total, count = 0.0, 0
    for out, ref in zip(outs, refs):
        if tuple(out.shape) != tuple(ref.shape):
            return math.inf
        a = out.detach().to("cpu", torch.float64)
        b = ref.detach().to("cpu", torch.float64)
        both_nan = torch.isnan(a) & torch.isnan(b)
        same_inf = torch.isinf(a) & (a == b)
        diff = torch.where(both_nan | same_inf, torch.zeros_like(a), a - b)
        if not bool(torch.isfinite(diff).all()):
            return math.inf
        total += float(diff.pow(2).sum())
        count += diff.numel()
    return math.sqrt(total / count) if count else 0.0


def multiplier(dtype: str, numel: int) -> float:
    """k = 2, or 3 for float16/bfloat16 results and for small tensors (<= 10 elements)."""
    return 3.0 if dtype in ("float16", "bfloat16") or numel <= SMALL_TENSOR_NUMEL else 2.0


@dataclass(frozen=True)
class Verdict:
    accepted: bool
    compiled_err: float
    allowed: float
    k: float


def judge(dtype: str, eager_err: float, compiled_err: float, numel: int) -> Verdict:
    """Accept when compiled_err <= k * eager_err + tol / 10."""
    k = multiplier(dtype, numel)
    allowed = k * eager_err + row_for(dtype).compiled_tol / 10.0
    return Verdict(compiled_err <= allowed, compiled_err, allowed, k)
