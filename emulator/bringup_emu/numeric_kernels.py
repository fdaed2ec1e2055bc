"""The kernels behind the spec's `numerics` field (numerics.py), computed on host copies with torch's CPU ops."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch

HostFn = Callable[..., Any]


def _host(value: Any) -> Any:
    return value.cpu() if isinstance(value, torch.Tensor) else value


def _round(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t.to(dtype)


def stored_partials_cumsum(x: torch.Tensor, dim: int, **_: Any) -> torch.Tensor:
    steps = x.movedim(dim, 0)
    out = torch.empty_like(steps)
    if steps.shape[0]:
        acc = steps[0].clone()
        out[0] = acc
        for i in range(1, steps.shape[0]):
            acc = acc + steps[i]  # the running sum rounded to the dtype after every step
            out[i] = acc
    return out.movedim(0, dim)


def _reduced(x: torch.Tensor, dim: Any) -> tuple[torch.Tensor, list[int]]:
    dims = list(range(x.dim())) if dim is None or (isinstance(dim, (list, tuple)) and not dim) else (
        [dim] if isinstance(dim, int) else list(dim))
    dims = [d % max(x.dim(), 1) for d in dims]
    kept = [d for d in range(x.dim()) if d not in dims]
    moved = x.permute(*kept, *dims) if x.dim() else x
    length = 1
    for d in dims:
        length *= x.shape[d] if x.dim() else 1
    return moved.reshape(*[x.shape[d] for d in kept], length), dims


def stored_partials_sum(x: torch.Tensor, dim: Any = None, keepdim: bool = False, **_: Any) -> torch.Tensor:
    flat, dims = _reduced(x, dim)
    acc = torch.zeros(flat.shape[:-1], dtype=x.dtype)
    for i in range(flat.shape[-1]):
        acc = acc + flat[..., i]
    for d in sorted(dims) if keepdim else ():
        acc = acc.unsqueeze(d)
    return acc


def stored_partials_mean(x: torch.Tensor, dim: Any = None, keepdim: bool = False, **_: Any) -> torch.Tensor:
    total = stored_partials_sum(x, dim, keepdim)
    count = x.numel() // max(total.numel(), 1) if x.numel() else 0
    return (total.to(torch.float32) / count).to(x.dtype)


def split_k_product(a: torch.Tensor, b: torch.Tensor, splits: int = 4) -> torch.Tensor:
    k = a.shape[-1]
    edges = [round(i * k / splits) for i in range(splits + 1)]
    acc = torch.matmul(a[..., :0], b[..., :0, :])  # zeros of the result's shape and dtype
    for lo, hi in itertools.pairwise(edges):
        acc = acc + torch.matmul(a[..., lo:hi], b[..., lo:hi, :])  # each chunk and each partial in the dtype
    return acc


def split_k_addmm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor, beta: Any = 1, alpha: Any = 1,
                  **_: Any) -> torch.Tensor:
    product = split_k_product(a, b).to(torch.float32)
    return (beta * c.to(torch.float32) + alpha * product).to(a.dtype)


def stored_exps(x: torch.Tensor, dim: int, half_to_float: bool = False, log: bool = False, **_: Any
                ) -> torch.Tensor:
    values = x.to(torch.float32)
    shifted = values - values.amax(dim, keepdim=True)
    exps = torch.exp(shifted).to(x.dtype).to(torch.float32)  # each exp stored in the dtype
    total = exps.sum(dim, keepdim=True)
    result = shifted - torch.log(total) if log else exps / total
    return result.to(torch.float32 if half_to_float else x.dtype)


def one_pass_layer_norm(x: torch.Tensor, shape: Any, weight: Any, bias: Any, eps: float
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    values = x.to(torch.float32)
    dims = list(range(x.dim() - len(shape), x.dim()))
    mean = values.mean(dims, keepdim=True)
    var = ((values * values).mean(dims, keepdim=True) - mean * mean).clamp_min(0)
    rstd = torch.rsqrt(var + eps)
    out = (values - mean) * rstd
    if weight is not None:
        out = out * weight.to(torch.float32)
    if bias is not None:
        out = out + bias.to(torch.float32)
    return out.to(x.dtype), mean, rstd


HOST: dict[str, HostFn] = {
    "cumsum": lambda x, dim, **_: torch.cumsum(x, dim),
    "sum": lambda x, dim=None, keepdim=False, **_: torch.sum(x, dim, keepdim) if dim else torch.sum(x),
    "mean": lambda x, dim=None, keepdim=False, **_: torch.mean(x, dim, keepdim) if dim else torch.mean(x),
    "mm": torch.mm,
    "bmm": torch.bmm,
    "addmm": lambda c, a, b, beta=1, alpha=1, **_: torch.addmm(c, a, b, beta=beta, alpha=alpha),
    "baddbmm": lambda c, a, b, beta=1, alpha=1, **_: torch.baddbmm(c, a, b, beta=beta, alpha=alpha),
    "_softmax": lambda x, dim, half_to_float, **_: torch._softmax(x, dim, half_to_float),
    "_log_softmax": lambda x, dim, half_to_float, **_: torch._log_softmax(x, dim, half_to_float),
    "native_layer_norm": torch.native_layer_norm,
    "rsqrt": lambda x, **_: torch.rsqrt(x),
    "native_batch_norm": torch.native_batch_norm,
}
LEGAL_KERNELS: dict[str, HostFn] = {
    "cumsum": stored_partials_cumsum, "sum": stored_partials_sum, "mean": stored_partials_mean,
    "mm": split_k_product, "bmm": split_k_product, "addmm": split_k_addmm, "baddbmm": split_k_addmm,
    "_softmax": stored_exps, "_log_softmax": lambda x, dim, half_to_float, **_: stored_exps(x, dim, half_to_float,
                                                                                             log=True),
    "native_layer_norm": one_pass_layer_norm,
}


def _biased(host: HostFn, fraction: float) -> HostFn:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        result = host(*args, **kwargs)
        first = result[0] if isinstance(result, tuple) else result
        scaled = (first.to(torch.float32) * (1.0 + fraction)).to(first.dtype)
        return (scaled, *result[1:]) if isinstance(result, tuple) else scaled
    return kernel


def kernel_for(op: str, variant: str) -> Callable[..., Any]:
    """The device kernel: host copies in, the variant's result written into the device output (or returned)."""
    host = _biased(HOST[op], float(variant.removeprefix("bias:"))) if variant.startswith("bias:") \
        else LEGAL_KERNELS[op]

    def device_kernel(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("out", None)
        kwargs.pop("dtype", None)
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        with torch.no_grad():
            result = host(*(_host(a) for a in args), **{k: _host(v) for k, v in kwargs.items()})
        if out is None:
            return tuple(r.to(device) for r in result) if isinstance(result, tuple) else result.to(device)
        out.resize_(result.shape)
        out.copy_(result)
        return out
    return device_kernel
