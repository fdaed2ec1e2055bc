"""CPU kernels for the numerical judge's tests, installed over aten's with torch.library (tests/probes/ops/conftest.py).

Each computes in numpy, so it never re-enters the op it replaces; float64 (the reference) stays exact, every other
dtype gets the variant: LEGAL ones round differently but correctly (partials stored in the dtype, split-K with
partials rounded to the dtype, exps stored in the dtype, one-pass variance), BIASED ones scale the result, FAULTS
are kernel bugs of several kinds. Imports only torch and numpy, so the same kernels can judge an older bringup.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import torch

Kernel = Callable[..., torch.Tensor]


UNDER_TEST = (torch.float32, torch.bfloat16, torch.float16)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().to(torch.float64 if t.dtype == torch.float64 else torch.float32).numpy()


def reference_safe(kernel: Kernel, exact: Callable[..., np.ndarray]) -> Kernel:
    """kernel for the dtypes under test; any other input (the float64 reference, and the judge's own integer and
    float64 sums while the kernel is installed) computed exactly by `exact` on its numpy values."""
    def guarded(x: torch.Tensor, *args, dtype=None, **kwargs):
        if x.dtype in UNDER_TEST and dtype is None:
            return kernel(x, *args, **kwargs)
        with np.errstate(invalid="ignore"):
            values = exact(x.detach().contiguous().numpy(), *args, **kwargs)
        out = torch.from_numpy(np.array(values))
        return out.to(dtype) if dtype is not None else out
    return guarded


def _back(values: np.ndarray, like: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(values)).to(like.dtype)


def _round(values: np.ndarray, like: torch.Tensor) -> np.ndarray:
    """values rounded to like's dtype (float32 arrays in and out)."""
    values = np.asarray(values, dtype=np.float32)
    rounded = torch.from_numpy(np.ascontiguousarray(values)).to(like.dtype).float().numpy()
    return rounded.reshape(values.shape)


def _dims(dim, ndim: int) -> tuple[int, ...]:
    dims = (dim,) if isinstance(dim, int) else tuple(dim or range(ndim))
    return tuple(d % ndim for d in dims) if ndim else ()


# ---- legal variants -------------------------------------------------------------------------------------------

def stored_partials_cumsum(x: torch.Tensor, dim: int, *, dtype=None) -> torch.Tensor:
    """A scan that stores its running sum in the dtype after every step."""
    if x.dtype == torch.float64:
        return _back(np.cumsum(_np(x), axis=dim), x)
    values = np.moveaxis(_np(x), dim, 0).copy()
    for i in range(1, values.shape[0]):
        values[i] = _round(values[i - 1] + values[i], x)
    return _back(np.moveaxis(values, 0, dim), x)


def _stored_partials_sum(x: torch.Tensor, dim, keepdim: bool) -> np.ndarray:
    dims = _dims(dim, x.dim())
    values = _np(x)
    if x.dtype == torch.float64 or x.numel() == 0:
        return values.sum(axis=dims, keepdims=keepdim)
    moved = np.moveaxis(values, dims, tuple(range(-len(dims), 0)))
    flat = moved.reshape(*moved.shape[:moved.ndim - len(dims)], -1)
    acc = np.zeros(flat.shape[:-1], dtype=np.float32)
    for i in range(flat.shape[-1]):
        acc = _round(acc + flat[..., i], x)
    return np.expand_dims(acc, dims) if keepdim else acc


def stored_partials_sum(x: torch.Tensor, dim, keepdim: bool = False, *, dtype=None) -> torch.Tensor:
    return _back(_stored_partials_sum(x, dim, keepdim), x)


def stored_partials_mean(x: torch.Tensor, dim, keepdim: bool = False, *, dtype=None) -> torch.Tensor:
    count = int(np.prod([x.shape[d] for d in _dims(dim, x.dim())]))
    with np.errstate(invalid="ignore"):
        mean = _stored_partials_sum(x, dim, keepdim) / np.float32(count)
    return _back(mean if x.dtype == torch.float64 else _round(mean, x), x)


SPLITS = 4


def _split_k(a: np.ndarray, b: np.ndarray, like: torch.Tensor, splits: int = SPLITS) -> np.ndarray:
    """K in `splits` chunks, each accumulated in float32 and rounded to the dtype, the chunks summed in the dtype."""
    if like.dtype == torch.float64:
        return a @ b
    k = a.shape[-1]
    bounds = np.linspace(0, k, splits + 1).astype(int)
    acc = np.zeros((*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1]), dtype=np.float32)
    for lo, hi in itertools.pairwise(bounds):
        acc = _round(acc + _round(a[..., lo:hi] @ b[..., lo:hi, :], like), like)
    return acc


def split_k_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _back(_split_k(_np(a), _np(b), a), a)


def split_k_addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1) -> torch.Tensor:
    product = _split_k(_np(a), _np(b), a)
    total = beta * _np(c) + alpha * product
    return _back(total if a.dtype == torch.float64 else _round(total, a), a)


def stored_exps_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    """exp(x - max) stored in the dtype before the float32 sum."""
    values = _np(x)
    exps = np.exp(values - values.max(axis=dim, keepdims=True))
    if x.dtype != torch.float64:
        exps = _round(exps, x)
    return _back(exps / exps.sum(axis=dim, keepdims=True, dtype=exps.dtype), x)


def stored_exps_log_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:
    values = _np(x)
    shifted = values - values.max(axis=dim, keepdims=True)
    exps = np.exp(shifted)
    if x.dtype != torch.float64:
        exps = _round(exps, x)
    return _back(shifted - np.log(exps.sum(axis=dim, keepdims=True, dtype=exps.dtype)), x)


def one_pass_layer_norm(x: torch.Tensor, shape, weight, bias, eps: float):
    """Mean and E[x^2] in one float32 pass (var = E[x^2] - mean^2), a legal and less accurate form."""
    values = _np(x)
    mean = values.mean(axis=-1, keepdims=True)
    var = np.maximum((values * values).mean(axis=-1, keepdims=True) - mean * mean, 0)
    rstd = 1.0 / np.sqrt(var + eps)
    out = (values - mean) * rstd
    if weight is not None:
        out = out * _np(weight)
    if bias is not None:
        out = out + _np(bias)
    stats = torch.from_numpy(np.ascontiguousarray(mean.squeeze(-1)))
    return (_back(out, x), stats.to(x.dtype if x.dtype == torch.float64 else torch.float32),
            torch.from_numpy(np.ascontiguousarray(rstd.squeeze(-1))).to(stats.dtype))


def _np_sum(values: np.ndarray, dim, keepdim: bool = False) -> np.ndarray:
    return values.sum(axis=_dims(dim, values.ndim), keepdims=keepdim)


def _np_mean(values: np.ndarray, dim, keepdim: bool = False) -> np.ndarray:
    return values.mean(axis=_dims(dim, values.ndim), keepdims=keepdim)


def _np_cumsum(values: np.ndarray, dim: int) -> np.ndarray:
    return np.cumsum(values, axis=dim)


LEGAL: dict[str, Kernel] = {
    "cumsum": reference_safe(stored_partials_cumsum, _np_cumsum),
    "sum.dim_IntList": reference_safe(stored_partials_sum, _np_sum),
    "mean.dim": reference_safe(stored_partials_mean, _np_mean),
    "mm": split_k_mm, "bmm": split_k_mm, "addmm": split_k_addmm, "baddbmm": split_k_addmm,
    "_softmax": stored_exps_softmax, "_log_softmax": stored_exps_log_softmax, "native_layer_norm": one_pass_layer_norm,
}
# the catalog's ops each aten kernel above serves
LEGAL_OPS: dict[str, tuple[str, ...]] = {
    "cumsum": ("cumsum",), "sum.dim_IntList": ("sum",), "mean.dim": ("mean", "rms_norm"),
    "mm": ("matmul",), "bmm": ("bmm",), "addmm": ("addmm", "linear"), "baddbmm": ("baddbmm",),
    "_softmax": ("softmax",), "_log_softmax": ("log_softmax",), "native_layer_norm": ("layer_norm",),
}


# ---- biased variants and faults -------------------------------------------------------------------------------

def scaled(kernel: Kernel, factor: float) -> Kernel:
    """kernel's result (the first output of a tuple) times factor, for every dtype but the float64 reference's;
    the product is formed in float32 and rounded once, so the scale is exactly `factor` on average (a product
    formed in bfloat16 would round 1.005 * x systematically to one neighbour)."""
    def scale(t: torch.Tensor) -> torch.Tensor:
        return (t.to(torch.float32) * factor).to(t.dtype)

    def biased(x: torch.Tensor, *args, **kwargs):
        result = kernel(x, *args, **kwargs)
        if x.dtype not in UNDER_TEST:
            return result
        if isinstance(result, tuple):
            return (scale(result[0]), *result[1:])
        return scale(result)
    return biased


def exact_numpy(fn: Callable[..., np.ndarray]) -> Kernel:
    """An op computed in numpy in float32 (float64 for the reference) and rounded once: a correct kernel."""
    return lambda x, *args, **kwargs: _back(fn(_np(x), *args, **kwargs), x)


def _truncate(values: np.ndarray, like: torch.Tensor) -> np.ndarray:
    """values (float32) cut to like's dtype toward zero: the low significand bits dropped, not rounded."""
    keep = {torch.bfloat16: 16, torch.float16: 13}.get(like.dtype, 0)
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.int32)
    return (bits & ~np.int32((1 << keep) - 1)).view(np.float32)


def _truncating_sum(x: torch.Tensor, dim, keepdim: bool = False) -> torch.Tensor:
    """Fault: each partial sum stored in the dtype by truncation toward zero (a wrong rounding mode)."""
    dims = _dims(dim, x.dim())
    moved = np.moveaxis(_np(x), dims, tuple(range(-len(dims), 0)))
    flat = moved.reshape(*moved.shape[:moved.ndim - len(dims)], -1)
    acc = np.zeros(flat.shape[:-1], dtype=np.float32)
    for i in range(flat.shape[-1]):
        acc = _truncate(acc + flat[..., i], x)
    return _back(np.expand_dims(acc, dims) if keepdim else acc, x)


def _exclusive_cumsum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Fault: an exclusive scan (each output misses its own term)."""
    values = np.cumsum(_np(x), axis=dim)
    if x.dtype != torch.float64:
        values = values - _np(x)
    return _back(values, x)


def approximate_rsqrt(x: torch.Tensor) -> torch.Tensor:
    """Fault: rsqrt from a 12-bit estimate without its Newton step, in every dtype but the reference's."""
    values = 1.0 / np.sqrt(_np(x))
    if x.dtype != torch.float64:
        values = values * (1 + 3e-4 * np.cos(values * 977.0))
    return _back(values, x)


truncating_sum = reference_safe(_truncating_sum, _np_sum)
exclusive_cumsum = reference_safe(_exclusive_cumsum, _np_cumsum)


def _float32(np_fn: Callable[..., np.ndarray]) -> Kernel:
    """A correct kernel: np_fn on the float32 values (float64 for the reference), rounded once to the dtype."""
    def kernel(x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        with np.errstate(invalid="ignore"):
            return _back(np_fn(_np(x), *args, **kwargs), x)
    return reference_safe(kernel, np_fn)


def accurate_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _back(_split_k(_np(a), _np(b), a, splits=1), a)


def accurate_addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1) -> torch.Tensor:
    return _back(beta * _np(c) + alpha * _split_k(_np(a), _np(b), a, splits=1), a)


def _np_rsqrt(values: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(values)


# accurate kernels (float32 arithmetic, one rounding), which the biased variants scale; for rms_norm, whose
# statistics are float32 whatever the dtype, its rsqrt is scaled
ACCURATE: dict[str, tuple[Kernel, tuple[str, ...]]] = {
    "cumsum": (_float32(_np_cumsum), ("cumsum",)),
    "sum.dim_IntList": (_float32(_np_sum), ("sum",)),
    "mean.dim": (_float32(_np_mean), ("mean",)),
    "mm": (accurate_mm, ("matmul",)),
    "bmm": (accurate_mm, ("bmm",)),
    "addmm": (accurate_addmm, ("addmm", "linear")),
    "baddbmm": (accurate_addmm, ("baddbmm",)),
    "_softmax": (LEGAL["_softmax"], ("softmax",)),
    "_log_softmax": (LEGAL["_log_softmax"], ("log_softmax",)),
    "native_layer_norm": (LEGAL["native_layer_norm"], ("layer_norm",)),
    "rsqrt": (_float32(_np_rsqrt), ("rms_norm", "F.rms_norm")),
}


def _biased(name: str, factor: float) -> Kernel:
    return scaled(ACCURATE[name][0], factor)


# (label, aten op replaced, kernel, catalog ops, dtype): kernel faults across the families; a fault is caught when
# at least one case of its ops fails
FAULTS: tuple[tuple[str, str, Kernel, tuple[str, ...], str], ...] = (
    ("cumsum x1.01 (bfloat16)", "cumsum", _biased("cumsum", 1.01), ("cumsum",), "bfloat16"),
    ("matmul x1.008 (bfloat16)", "mm", _biased("mm", 1.008), ("matmul",), "bfloat16"),
    ("softmax x1.01 (float32)", "_softmax", _biased("_softmax", 1.01), ("softmax",), "float32"),
    ("sum x1.005 (float16)", "sum.dim_IntList", _biased("sum.dim_IntList", 1.005), ("sum",), "float16"),
    ("mean x1.005 (bfloat16)", "mean.dim", _biased("mean.dim", 1.005), ("mean",), "bfloat16"),
    ("layer_norm x1.005 (bfloat16)", "native_layer_norm", _biased("native_layer_norm", 1.005), ("layer_norm",),
     "bfloat16"),
    ("rms_norm's rsqrt x1.005 (float16)", "rsqrt", _biased("rsqrt", 1.005), ("rms_norm",), "float16"),
    ("bmm x1.005 (float16)", "bmm", _biased("bmm", 1.005), ("bmm",), "float16"),
    ("log_softmax x1.005 (bfloat16)", "_log_softmax", _biased("_log_softmax", 1.005), ("log_softmax",), "bfloat16"),
    ("linear x(1+1e-4) (float32)", "addmm", _biased("addmm", 1 + 1e-4), ("linear",), "float32"),
    ("baddbmm x0.995 (bfloat16)", "baddbmm", _biased("baddbmm", 0.995), ("baddbmm",), "bfloat16"),
    ("sum truncating its partials (bfloat16)", "sum.dim_IntList", truncating_sum, ("sum",), "bfloat16"),
    ("cumsum exclusive (float16)", "cumsum", exclusive_cumsum, ("cumsum",), "float16"),
    ("rms_norm's rsqrt without its Newton step (float32)", "rsqrt", reference_safe(approximate_rsqrt, _np_rsqrt),
     ("rms_norm",), "float32"),
)
