"""Every kind of linear-weight storage (kinds.py), in one table built here from the modules that implement them:
the plain layouts (layouts.py), the panels kernel (kernels/panels.py), the int8 / int4 blocks with their kernel and
its dequantizing fallback (formats/integer.py, kernels/quantized.py), fp8 (formats/fp8.py), and torch's device
kernels (formats/device_int8.py, device_int4.py, device_fp8.py). Nothing registers
itself on import: a kind exists because it is listed here. Host kernels build at their first use, not here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import torch

from bringup.runner.weights import layouts
from bringup.runner.weights.formats import device_fp8, device_fp8_rowwise, device_int4, device_int8, fp8
from bringup.runner.weights.formats.integer import reference_linear
from bringup.runner.weights.kernels import panels, quantized
from bringup.runner.weights.kinds import (
    ANY_DEVICE,
    DEQUANT_KINDS,
    FP8,
    FP8_ROWWISE,
    FP8_SCALED_MM,
    HOST_MEMORY,
    IN_OUT,
    INT4_PACK_KERNELS,
    INT8_PACK,
    OUT_IN,
    PACKED,
    PANELS,
    SLICES,
)

Apply = Callable[[torch.Tensor, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


@dataclass(frozen=True)
class Kind:
    """One way to store and apply a linear weight given as [out, in]."""

    name: str
    placement: str  # ANY_DEVICE, or HOST_MEMORY: a host kernel reads it
    place: Callable[[torch.Tensor], torch.Tensor]  # [out, in] (on its device, in its dtype) -> the stored form
    to_out_in: Callable[[torch.Tensor], torch.Tensor] | None  # the stored form back as [out, in]; None: it cannot
    apply: Apply  # x [T, in] times the stored weight, plus the bias, in x's dtype
    reference: Apply  # the same product in float64, from the stored weight: what `apply` is checked against


def _reference_through(to_out_in) -> Apply:
    return lambda x, w, b: layouts.float64_linear(x, to_out_in(w), b)


def _slices_reference(x: torch.Tensor, table: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return layouts.float64_linear(x, layouts.slices_to_out_in(table, x.shape[-1]), b)


def _panels_reference(x: torch.Tensor, stored: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    out = stored.shape[0] * panels.PANEL if b is None else b.numel()
    return layouts.float64_linear(x, panels.unpack(stored)[:out], b)


def _integer_reference(scheme: str) -> Apply:
    """x's blocks quantized as the kernel does, then the dequantized weight's product in float64."""
    return lambda x, w, b: reference_linear(x.detach().cpu().double(), quantized.DEQUANTIZE[scheme](w.cpu()),
                                            None if b is None else b.cpu())


def _integer_kinds() -> dict[str, Kind]:
    found = {}
    for scheme, fallback in DEQUANT_KINDS.items():
        common = dict(placement=HOST_MEMORY, place=quantized.QUANTIZE[scheme], to_out_in=quantized.DEQUANTIZE[scheme],
                      reference=_integer_reference(scheme))
        found[scheme] = Kind(scheme, apply=quantized.kernel_linear(scheme), **common)
        found[fallback] = Kind(fallback, apply=quantized.dequantized_linear(scheme), **common)
    return found


def _int4_pack_kinds() -> dict[str, Kind]:
    """One kind per int4 kernel: the same storage plan, each with the kernel's own packed layout."""
    return {name: Kind(name, ANY_DEVICE, partial(device_int4.quantize, kernel), partial(device_int4.dequantize, kernel),
                       partial(device_int4.linear, kernel), partial(device_int4.reference, kernel))
            for name, kernel in INT4_PACK_KERNELS.items()}


def _out_in_apply(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return torch.nn.functional.linear(x, w, b)


KINDS: dict[str, Kind] = {
    IN_OUT: Kind(IN_OUT, ANY_DEVICE, layouts.in_out_place, layouts.in_out_place, layouts.in_out_apply,
                 _reference_through(lambda w: w.t())),
    OUT_IN: Kind(OUT_IN, ANY_DEVICE, layouts.out_in_place, lambda w: w, _out_in_apply, _reference_through(lambda w: w)),
    PACKED: Kind(PACKED, ANY_DEVICE, layouts.packed_place, lambda w: w.to_dense(), layouts.packed_apply,
                 _reference_through(lambda w: w.to_dense())),
    SLICES: Kind(SLICES, ANY_DEVICE, layouts.slices_place, None, layouts.slices_apply, _slices_reference),
    PANELS: Kind(PANELS, HOST_MEMORY, panels.pack, panels.unpack, panels.apply, _panels_reference),
    **_integer_kinds(),
    FP8: Kind(FP8, ANY_DEVICE, fp8.quantize_fp8, fp8.dequantize_fp8, fp8.fp8_linear,
              _reference_through(fp8.dequantize_fp8)),
    INT8_PACK: Kind(INT8_PACK, ANY_DEVICE, device_int8.quantize, device_int8.dequantize, device_int8.linear,
                    device_int8.reference),
    FP8_SCALED_MM: Kind(FP8_SCALED_MM, ANY_DEVICE, device_fp8.quantize, device_fp8.dequantize, device_fp8.linear,
                        device_fp8.reference),
    FP8_ROWWISE: Kind(FP8_ROWWISE, ANY_DEVICE, device_fp8_rowwise.quantize, device_fp8_rowwise.dequantize,
                      device_fp8_rowwise.linear, device_fp8_rowwise.reference),
    **_int4_pack_kinds(),
}


def kind(name: str) -> Kind:
    found = KINDS.get(name)
    if found is None:
        raise ValueError(f"no linear-weight kind {name!r}; the kinds are {', '.join(KINDS)}")
    return found


def place(w: torch.Tensor, name: str) -> torch.Tensor:
    """Store a weight given as [out, in] (already on its device and dtype) for kind `name`."""
    return kind(name).place(w)


def to_out_in(w: torch.Tensor, name: str) -> torch.Tensor:
    """A weight stored for kind `name` back as [out, in] (panels keep their zero padding rows)."""
    back = kind(name).to_out_in
    if back is None:
        raise ValueError(f"weights stored as {name!r} cannot be converted back to [out, in]")
    return back(w)


def apply(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, name: str) -> torch.Tensor:
    """x [T, in] times a weight stored for kind `name`, plus the bias."""
    return kind(name).apply(x, w, b)


PACKED_DTYPES = (torch.float32, torch.bfloat16)


def packed_check(device: torch.device, dtype: torch.dtype) -> str | None:
    """None when pre-packed weights run here in `dtype` and are as accurate as F.linear against float64 (each error
    relative to the largest output: at most twice F.linear's, plus 1e-6; oneDNN may sum in another order, so a
    bfloat16 result may sit a rounding step from F.linear's) and unbiased (their least-squares scale against float64
    within the dtype's unit roundoff); otherwise why not."""
    from bringup.errors import exception_line

    if dtype not in PACKED_DTYPES:
        return f"packed weights are tried for float32 and bfloat16, not {dtype}"
    try:
        gen = torch.Generator().manual_seed(0)
        w, x = torch.randn(96, 64, generator=gen).to(dtype), torch.randn(37, 64, generator=gen).to(dtype)
        b = torch.randn(96, generator=gen).to(dtype)
        with torch.inference_mode():
            got = apply(x.to(device), place(w.to(device), PACKED), b.to(device), PACKED).cpu()
            plain = torch.nn.functional.linear(x, w, b)
    except Exception as exc:  # no oneDNN in this build, or not for this device
        return exception_line(exc, 120)
    reference = torch.nn.functional.linear(x.double(), w.double(), b.double())
    largest = float(reference.abs().max())
    err, plain_err = (float((t.double() - reference).abs().max()) / largest for t in (got, plain))
    scale = float((got.double() * reference).sum() / reference.pow(2).sum()) - 1.0
    if err > 2 * plain_err + 1e-6:
        return f"packed result's error {err:.2g} against float64, F.linear's {plain_err:.2g}"
    if abs(scale) > torch.finfo(dtype).eps / 2:  # beyond the unit roundoff: no rounding's doing (the bias test's floor)
        return f"packed result biased: a scale of {scale:+.2g} against float64"
    return None
