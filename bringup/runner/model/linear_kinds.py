"""Ways to store and apply a linear weight: `[in, out]` for `x @ W`, `[out, in]` for F.linear,
pre-packed for the device's oneDNN inner product, as column slices summed by `embedding_bag`, or as
16-column panels for bringup's own host kernel (host/panels.py, which registers the kind here: the host kernels
sit above the model). The layout chooser times them; the model uses the faster.

"slices": W [in, out] cut into P column slices stacked as a [P*in, out/P] table; `embedding_bag`
(mode sum, per-sample weights = x) computes each slice's x @ W_p as one bag, and bags run in
parallel, so a one-row product streams the weights on every core where a BLAS GEMV may use one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from bringup.errors import exception_line
from bringup.runner.model.fp8_weights import dequantize_fp8, fp8_linear, quantize_fp8

IN_OUT, OUT_IN, PACKED, SLICES, PANELS = "in_out", "out_in", "packed", "slices", "panels"
PLAIN_KINDS = (IN_OUT, OUT_IN)
# quantized in blocks of 32 (model/quantized_weights.py): applied by bringup's host kernel, or (the fallback) by
# dequantizing and calling F.linear in float32; host/quantized.py registers all four
INT8, INT4, INT8_DEQUANT, INT4_DEQUANT = "int8", "int4", "int8_dequant", "int4_dequant"
# int4 with d and m per group of 64 / 128 inputs (activations still per block of 32)
INT4_G64, INT4_G128, INT4_G64_DEQUANT, INT4_G128_DEQUANT = "int4_g64", "int4_g128", "int4_g64_dequant", \
    "int4_g128_dequant"
INTEGER_KINDS = (INT8, INT4, INT4_G64, INT4_G128, INT8_DEQUANT, INT4_DEQUANT, INT4_G64_DEQUANT, INT4_G128_DEQUANT)
# each kernel kind's module-level reference: the same storage, dequantized and applied by F.linear
DEQUANT_KINDS = {INT8: INT8_DEQUANT, INT4: INT4_DEQUANT, INT4_G64: INT4_G64_DEQUANT, INT4_G128: INT4_G128_DEQUANT}
FP8 = "fp8"  # float8_e4m3fn weights with a scale per output channel (model/fp8_weights.py), on any device
QUANTIZED_KINDS = (*INTEGER_KINDS, FP8)
HOST_KIND_NAMES = (PANELS, *INTEGER_KINDS)  # kinds whose storage and product a host module provides
SLICE_COUNTS = (8, 4, 2, 1)  # the most column slices that divide `out`


@dataclass(frozen=True)
class HostKind:
    """A host kernel's own weight storage: store a weight given as [out, in], turn it back, apply it."""

    place: Callable[[torch.Tensor], torch.Tensor]
    to_out_in: Callable[[torch.Tensor], torch.Tensor]
    apply: Callable[[torch.Tensor, torch.Tensor, torch.Tensor | None], torch.Tensor]


HOST_KINDS: dict[str, HostKind] = {}  # kind -> its kernel's storage, registered by the kernel's module (runner/host/)


def host_kind(kind: str) -> HostKind:
    found = HOST_KINDS.get(kind)
    if found is None:
        raise ValueError(f"weights stored as {kind!r} need their host kernel, which was never loaded "
                         f"(bringup.runner.host registers {', '.join(HOST_KINDS) or 'it'} when imported)")
    return found


def place(w: torch.Tensor, kind: str) -> torch.Tensor:
    """Store a weight given as [out, in] (already on its device and dtype) for `kind`."""
    if kind == IN_OUT:
        return w.t().contiguous()
    if kind == PACKED:
        return torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), None)
    if kind in HOST_KIND_NAMES:
        return host_kind(kind).place(w)
    if kind == FP8:
        return quantize_fp8(w)
    if kind == SLICES:
        p = next(n for n in SLICE_COUNTS if w.shape[0] % n == 0)
        return torch.cat(w.t().chunk(p, 1), 0).contiguous()  # [p*in, out/p]
    return w.contiguous()


CONVERTIBLE = (OUT_IN, IN_OUT, PANELS, PACKED)  # kinds `to_out_in` can turn back into [out, in]


def to_out_in(w: torch.Tensor, kind: str) -> torch.Tensor:
    """A weight stored for `kind` back as [out, in] (panels keep their zero padding rows)."""
    if kind == OUT_IN:
        return w
    if kind == IN_OUT:
        return w.t().contiguous()
    if kind in HOST_KIND_NAMES:
        return host_kind(kind).to_out_in(w)
    if kind == FP8:
        return dequantize_fp8(w)
    if kind == PACKED:
        return w.to_dense()
    raise ValueError(f"weights stored as {kind!r} cannot be converted back to [out, in]")


def apply(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, kind: str) -> torch.Tensor:
    """x [T, in] times a weight stored for `kind`, plus the bias."""
    if kind == IN_OUT:
        return torch.matmul(x, w) if b is None else torch.addmm(b, x, w)
    if kind == PACKED:
        return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")
    if kind == SLICES:
        return _slices(x, w, b)
    if kind in HOST_KIND_NAMES:
        return host_kind(kind).apply(x, w, b)
    if kind == FP8:
        return fp8_linear(x, w, b)
    return F.linear(x, w, b)


def _slices(x: torch.Tensor, table: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    rows, k = x.shape
    p = table.shape[0] // k
    indices, offsets = _bag_indices(rows, k, p, x.device)
    y = F.embedding_bag(indices, table, offsets, mode="sum", per_sample_weights=x.repeat(1, p).view(-1))
    y = y.view(rows, p * table.shape[1])
    return y if b is None else y + b


@functools.lru_cache(maxsize=64)
def _bag_indices(rows: int, k: int, p: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Bag r*p + j sums table rows j*k .. (j+1)*k - 1 weighted by x[r]."""
    return (torch.arange(p * k, device=device).repeat(rows), torch.arange(rows * p, device=device) * k)


def packed_check(device: torch.device, dtype: torch.dtype) -> str | None:
    """None when pre-packed weights run here and match F.linear; otherwise why not."""
    if dtype != torch.float32:
        return f"packed weights are only tried for float32, not {dtype}"
    try:
        gen = torch.Generator().manual_seed(0)
        w, x = torch.randn(48, 40, generator=gen), torch.randn(5, 40, generator=gen)
        b = torch.randn(48, generator=gen)
        with torch.inference_mode():
            got = apply(x.to(device), place(w.to(device), PACKED), b.to(device), PACKED).cpu()
        err = (got - F.linear(x, w, b)).abs().max().item()
    except Exception as exc:  # no oneDNN in this build, or not for this device
        return exception_line(exc, 120)
    return None if err <= 1e-4 else f"packed result differs from F.linear by {err:.2g}"


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage, for counting shared weights once (packed tensors have no data_ptr)."""
    return id(t) if t.is_mkldnn else t.data_ptr()
