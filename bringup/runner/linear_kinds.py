"""Ways to store and apply a linear weight: `[in, out]` for `x @ W`, `[out, in]` for F.linear, or
pre-packed for the device's oneDNN inner product. The layout chooser times them; the model uses the faster."""

from __future__ import annotations

import torch
import torch.nn.functional as F

IN_OUT, OUT_IN, PACKED = "in_out", "out_in", "packed"
PLAIN_KINDS = (IN_OUT, OUT_IN)


def place(w: torch.Tensor, kind: str) -> torch.Tensor:
    """Store a weight given as [out, in] (already on its device and dtype) for `kind`."""
    if kind == IN_OUT:
        return w.t().contiguous()
    if kind == PACKED:
        return torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), None)
    return w.contiguous()


def apply(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, kind: str) -> torch.Tensor:
    """x [T, in] times a weight stored for `kind`, plus the bias."""
    if kind == IN_OUT:
        return torch.matmul(x, w) if b is None else torch.addmm(b, x, w)
    if kind == PACKED:
        return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")
    return F.linear(x, w, b)


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
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:120] if str(exc).strip() else ''}"
    return None if err <= 1e-4 else f"packed result differs from F.linear by {err:.2g}"


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage, for counting shared weights once (packed tensors have no data_ptr)."""
    return id(t) if t.is_mkldnn else t.data_ptr()
