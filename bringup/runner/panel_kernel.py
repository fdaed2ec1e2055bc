"""The "panels" linear kernel for host memory (kernels/panel_linear.cpp, built by host_build).

One-row (decode) products are memory-bound; a BLAS GEMV may stream the weights on one core. This kernel
stores W as panels of 16 output columns ([k][16] each, contiguous) and splits the panels across the
process's OpenMP threads, so every core streams weights. It is one of the layouts the start-up chooser
times against the others; it is used only where it measured faster and its result matched F.linear.
Under torch.compile the kernel is an opaque custom op (`bringup::panel_linear`).
"""

from __future__ import annotations

import ctypes
import functools

import torch
import torch.nn.functional as F

from bringup.runner.host_build import KernelUnavailable, check_host_kernel, load

PANEL = 16


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("panel_linear.cpp")
    fn = lib.bringup_panel_linear
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                   ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    if lib.bringup_panel_width() != PANEL:
        raise KernelUnavailable(f"the panel library has width {lib.bringup_panel_width()}, expected {PANEL}")
    return lib


def pack(w: torch.Tensor) -> torch.Tensor:
    """W [n, k] (float32, host) as panels [ceil(n/16), k, 16]; output columns past n are zero."""
    n, k = w.shape
    pad = -n % PANEL
    if pad:
        w = torch.cat([w, w.new_zeros(pad, k)])
    return w.reshape(-1, PANEL, k).transpose(1, 2).contiguous()


def run(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [m, k] @ W^T + bias as [m, 16 * panels] (the padded width)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    m, k = x.shape
    n = panels.shape[0] * PANEL
    if bias is not None and bias.numel() != n:
        raise ValueError(f"bias has {bias.numel()} values for {n} panel columns; pad it like the weight")
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    library().bringup_panel_linear(x.data_ptr(), m, x.stride(0), panels.data_ptr(), k, n,
                                   None if bias is None else bias.data_ptr(), y.data_ptr(), n)
    return y


@torch.library.custom_op("bringup::panel_linear", mutates_args=())
def panel_linear_op(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return run(x, panels, bias)


@panel_linear_op.register_fake
def _panel_linear_shape(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty(x.shape[0], panels.shape[0] * PANEL)


def apply(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return panel_linear_op(x, panels, bias)
    return run(x, panels, bias)


def check(device: torch.device, dtype: torch.dtype) -> str | None:
    """None when the kernel builds, runs here and matches F.linear; otherwise why not."""

    def worst_error() -> float:
        gen = torch.Generator().manual_seed(0)
        w, b = torch.randn(48, 40, generator=gen), torch.randn(48, generator=gen)
        worst = 0.0
        for rows in (1, 3, 6, 11):
            x = torch.randn(rows, 40, generator=gen)
            worst = max(worst, (apply(x, pack(w), b) - F.linear(x, w, b)).abs().max().item())
        return worst

    return check_host_kernel(device, dtype, worst_error, "panels result differs from F.linear")
