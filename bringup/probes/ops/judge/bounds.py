"""Forward error bounds from an op's arithmetic (Higham), in float64, from the case's own inputs.

Every bound is per output element and holds for any order of the operations and for partial results stored in the
output dtype (u is the output dtype's unit roundoff), plus the output's own rounding and an underflow allowance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from bringup.probes.ops.judge.arithmetic import Arithmetic
from bringup.probes.ops.judge.roundoff import OPMATH_ROUNDOFF, growth, subnormal_spacing, unit_roundoff

POINTWISE_ULPS = 4.0  # "a few ulps": the result's rounding and the intermediate roundings of a kernel in the dtype
FUNCTION_ULPS = 2.0  # exp, log, rsqrt of a math library: within 2 ulps
CANCELLING_ULPS = 16.0  # gelu's 1 + erf(x / sqrt 2) for x << 0: erf's ulps near -1 and the sum's, times |x| / 2
# the eps each norm of the catalog adds to its mean square (F.layer_norm's default; the Llama RMSNorm's)
NORM_EPS = {"layer_norm": 1e-5, "rms_norm": 1e-6, "F.rms_norm": 1e-6}


def _mapped(args: list[Any], fn: Callable[[torch.Tensor], torch.Tensor]) -> list[Any]:
    return [fn(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _magnitudes(args: list[Any]) -> list[torch.Tensor]:
    return [a.abs() for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()]


def sum_bound(arith: Arithmetic, u: float) -> torch.Tensor:
    """Sums, scans and products: |error| <= gamma_n * (op applied to |inputs|) (Higham (4.4), (3.5), (3.13))."""
    with torch.no_grad():
        absolute = arith.reference_fn(*_mapped(arith.ref_args, torch.abs))
        terms = arith.reference_fn(*_mapped(arith.ref_args, torch.ones_like))
    n = float(terms.abs().max()) if terms.numel() else 1.0
    return growth(math.ceil(n), u) * absolute.abs()


def mean_bound(arith: Arithmetic, reference: torch.Tensor, u: float) -> torch.Tensor:
    """A sum of n terms and one division by n."""
    x = arith.ref_args[0]
    n = x.numel() / max(reference.numel(), 1)
    with torch.no_grad():
        absolute = arith.reference_fn(*_mapped(arith.ref_args, torch.abs))
    return growth(math.ceil(n) + 1, u) * absolute.abs()


def _shifted(arith: Arithmetic) -> tuple[torch.Tensor, int]:
    dim = -1 if arith.dim is None else arith.dim
    x = arith.ref_args[0]
    return x - x.amax(dim, keepdim=True), dim


def _exp_errors(shifted: torch.Tensor, dim: int, u: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Relative error of each exp (its own ulps and the rounding of its argument x - max) and of their sum
    (positive terms: gamma_n plus the weighted errors of the terms); also the exact probabilities."""
    probs = torch.softmax(shifted, dim)
    term = FUNCTION_ULPS * u + u * shifted.abs()
    total = (probs * term).sum(dim, keepdim=True) + growth(shifted.shape[dim], u)
    return term, total, probs


def softmax_bound(arith: Arithmetic, u: float) -> torch.Tensor:
    shifted, dim = _shifted(arith)
    if shifted.numel() == 0:
        return shifted
    term, total, probs = _exp_errors(shifted, dim, u)
    return probs * torch.expm1(term + total + 2 * u)  # + the division and the output's rounding


def log_softmax_bound(arith: Arithmetic, reference: torch.Tensor, u: float) -> torch.Tensor:
    """z = (x - max) - log(sum): the argument's rounding, log of a sum known to `total`, two roundings of z."""
    shifted, dim = _shifted(arith)
    if shifted.numel() == 0:
        return shifted
    _, total, _ = _exp_errors(shifted, dim, u)
    log_sum = torch.logsumexp(shifted, dim, keepdim=True)
    return u * shifted.abs() + total + FUNCTION_ULPS * u * log_sum.abs() + 2 * u * reference.abs()


def norm_bound(arith: Arithmetic, reference: torch.Tensor, u: float, centred: bool) -> torch.Tensor:
    """(x - mean) * rsqrt(var + eps) * w + b, statistics over the last dim: the mean's error (a sum), the
    variance's (a sum of squares, one-pass or two-pass), rsqrt's (half the variance's relative error plus its
    ulps), then the scaling and the affine terms."""
    x, weight, bias = [*arith.ref_args, None, None][:3]
    if x.numel() == 0:
        return reference.abs()
    n = x.shape[-1]
    eps = NORM_EPS.get(arith.op, 1e-5)
    mean = x.mean(-1, keepdim=True) if centred else torch.zeros_like(x[..., :1])
    centre = x - mean
    var = centre.pow(2).mean(-1, keepdim=True)
    mean_err = growth(n + 1, u) * x.abs().mean(-1, keepdim=True) if centred else torch.zeros_like(var)
    var_err = growth(n + 2, u) * x.pow(2).mean(-1, keepdim=True) + 2 * mean_err * centre.abs().mean(-1, keepdim=True)
    scale = torch.rsqrt(var + eps)
    rsqrt_rel = 0.5 * var_err / (var + eps) + FUNCTION_ULPS * u
    normed_err = (centre.abs() * (rsqrt_rel + u) + mean_err + u * centre.abs()) * scale
    w = weight.abs() if isinstance(weight, torch.Tensor) else torch.ones(())
    out = normed_err * w + 2 * u * (centre * scale).abs() * w
    if isinstance(bias, torch.Tensor):
        out = out + u * bias.abs()
    return out + 2 * u * reference.abs()


def pointwise_bound(arith: Arithmetic, reference: torch.Tensor, u: float) -> torch.Tensor:
    """A few ulps of the result; addition also a few ulps of its operands (a Python scalar may be rounded to the
    dtype first), and a cancelling formula (gelu) the float32 opmath's rounding of its argument."""
    bound = POINTWISE_ULPS * (u + OPMATH_ROUNDOFF) * reference.abs()
    operands = _magnitudes(arith.ref_args)
    if arith.rule == "addition" and operands:
        bound = bound + POINTWISE_ULPS * u * sum(torch.broadcast_tensors(*operands, reference)[:-1])
    if arith.rule == "cancelling" and operands:
        bound = bound + CANCELLING_ULPS * OPMATH_ROUNDOFF * operands[0]
    return bound


def error_bound(arith: Arithmetic, reference: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """The bound per element of `reference` (float64, as the device's output), or None where the op has no rule
    here (its case is judged by the tolerance table)."""
    u = unit_roundoff(dtype)
    rule = arith.rule
    if rule == "sum":
        accumulated = sum_bound(arith, u)
        bound = accumulated + u * (reference.abs() + accumulated)  # + the output's rounding
    elif rule == "mean":
        accumulated = mean_bound(arith, reference, u)
        bound = accumulated + u * (reference.abs() + accumulated)
    elif rule == "softmax":
        bound = softmax_bound(arith, u)
    elif rule == "log_softmax":
        bound = log_softmax_bound(arith, reference, u)
    elif rule in ("layer_norm", "rms_norm"):
        bound = norm_bound(arith, reference, u, centred=rule == "layer_norm")
    elif rule in ("pointwise", "addition", "cancelling"):
        bound = pointwise_bound(arith, reference, u)
    else:
        return None
    if tuple(bound.shape) != tuple(reference.shape):
        bound = torch.broadcast_to(bound, reference.shape)
    return bound + POINTWISE_ULPS * subnormal_spacing(dtype)
