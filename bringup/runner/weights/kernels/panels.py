"""The "panels" linear kernel for host memory (kernels/panel_linear.cpp, built by host_build).

One-row (decode) products are memory-bound; a BLAS GEMV may stream the weights on one core. This kernel
stores W as panels of 16 output columns ([k][16] each, contiguous; bfloat16 pairs-along-k, see `pack`) and splits
the panels across the process's OpenMP threads, so every core streams weights; float32, or bfloat16 accumulated in
float32 (multiplied in bfloat16 with vdpbf16ps where the CPU has AVX512-BF16). It is one
of the layouts the start-up chooser times against the others; it is used only where it measured faster and its
result matched F.linear.
Under torch.compile the kernel is an opaque custom op (`bringup::panel_linear`).
"""

from __future__ import annotations

import ctypes
import functools
import traceback

import torch
import torch.nn.functional as F

from bringup.runner.weights.kernels.build import (
    HostKernelInputError,
    check_host_kernel,
    load_linear,
    require_host_tensor,
)
from bringup.runner.weights.layouts import PANEL

# the kernel's entry point per dtype, and how far its result may be from F.linear's (relative, for bfloat16:
# both round one float32 sum to bfloat16, so they differ by at most about one unit in the last place; vdpbf16ps's
# subnormal flush and pairwise adds change a sum by far less)
ENTRY_POINTS = {torch.float32: "bringup_panel_linear", torch.bfloat16: "bringup_panel_linear_bf16"}
TOLERANCES = {torch.float32: 1e-4, torch.bfloat16: 1.6e-2}


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    return load_linear("panel_linear.cpp", list(ENTRY_POINTS.values()))


def pack(w: torch.Tensor) -> torch.Tensor:
    """W [n, k] (float32 or bfloat16, host) as panels [ceil(n/16), k, 16]; output columns past n are zero.
    A float32 panel holds its [k][16] weights in that order; a bfloat16 one pairs-along-k (`_pairs_along_k`)."""
    if w.dtype not in ENTRY_POINTS:
        raise HostKernelInputError(f"w is {w.dtype}; the kernel reads torch.float32 or torch.bfloat16 only")
    require_host_tensor("w", w, w.dtype, dims=2)
    n, k = w.shape
    pad = -n % PANEL
    if pad:
        w = torch.cat([w, w.new_zeros(pad, k)])
    panels = w.reshape(-1, PANEL, k).transpose(1, 2)
    return _pairs_along_k(panels) if w.dtype == torch.bfloat16 else panels.contiguous()


def unpack(panels: torch.Tensor) -> torch.Tensor:
    """The weight [16 * num_panels, k] that `pack` stored (padding columns become zero rows)."""
    if panels.dtype == torch.bfloat16:
        panels = _rows_along_k(panels)
    return panels.transpose(1, 2).reshape(-1, panels.shape[1]).contiguous()


def _pairs_along_k(panels: torch.Tensor) -> torch.Tensor:
    """Panels [p, k, 16] with each pair of k rows (2i, 2i+1) stored as [16][2], the layout vdpbf16ps reads (one
    64-byte row: two k-steps of 16 columns); for an odd k the last row stays [16]. Same shape, contiguous."""
    p, k, _ = panels.shape
    even = k - k % 2
    pairs = panels[:, :even].reshape(p, even // 2, 2, PANEL).transpose(2, 3).reshape(p, even, PANEL)
    return torch.cat([pairs, panels[:, even:]], dim=1).contiguous()


def _rows_along_k(panels: torch.Tensor) -> torch.Tensor:
    """The panels [p, k, 16] in k order that `_pairs_along_k` stored."""
    p, k, _ = panels.shape
    even = k - k % 2
    rows = panels[:, :even].reshape(p, even // 2, PANEL, 2).transpose(2, 3).reshape(p, even, PANEL)
    return torch.cat([rows, panels[:, even:]], dim=1)


def run(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [m, k] @ W^T + bias as [m, 16 * panels] (the padded width)."""
    check_inputs(x, panels, bias)  # before the library loads or a pointer leaves
    if x.stride(-1) != 1:
        x = x.contiguous()
    m, k = x.shape
    n = panels.shape[0] * PANEL
    y = torch.empty(m, n, dtype=x.dtype, device=x.device)
    entry = getattr(library(), ENTRY_POINTS[x.dtype])
    entry(x.data_ptr(), m, x.stride(0), panels.data_ptr(), k, n, None if bias is None else bias.data_ptr(),
          y.data_ptr(), n)
    return y


def check_inputs(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> None:
    """HostKernelInputError unless the kernel can read every argument safely: host tensors of one dtype the
    kernel has (float32 or bfloat16), panels as `pack` makes them, rows as long as the packed weight's k, and a
    bias covering the padded width."""
    if x.dtype not in ENTRY_POINTS:
        raise HostKernelInputError(f"x is {x.dtype}; the kernel reads torch.float32 or torch.bfloat16 only")
    dtype = x.dtype  # the weight and bias must be the same
    require_host_tensor("x", x, dtype, dims=2)
    require_host_tensor("panels", panels, dtype, dims=3, contiguous=True)
    if panels.shape[2] != PANEL:
        raise HostKernelInputError(f"panels has shape {list(panels.shape)}; expected [num_panels, k, {PANEL}] "
                                   "as pack() makes it")
    if x.shape[1] != panels.shape[1]:
        raise HostKernelInputError(f"x has {x.shape[1]} features per row but the packed weight has k={panels.shape[1]}")
    if bias is not None:
        _check_bias(bias, panels.shape[0] * PANEL, dtype)


def _check_bias(bias: torch.Tensor, width: int, dtype: torch.dtype) -> None:
    require_host_tensor("bias", bias, dtype, dims=1, contiguous=True)
    if bias.numel() != width:
        raise HostKernelInputError(f"bias has {bias.numel()} values for {width} panel columns; pad it like the weight")


@torch.library.custom_op("bringup::panel_linear", mutates_args=())
def panel_linear_op(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return run(x, panels, bias)


@panel_linear_op.register_fake
def _panel_linear_shape(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty(x.shape[0], panels.shape[0] * PANEL)


def raised_here(exc: BaseException) -> bool:
    """Whether `exc` was raised in this module (the kernel's call, its checks, its library's loading), as opposed
    to elsewhere in a forward that also ran the kernel."""
    return any(frame.f_code.co_filename == __file__ for frame, _ in traceback.walk_tb(exc.__traceback__))


def apply(x: torch.Tensor, panels: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return panel_linear_op(x, panels, bias)
    return run(x, panels, bias)


def check(device: torch.device, dtype: torch.dtype) -> str | None:
    """None when the kernel builds, runs here and matches F.linear; otherwise why not."""

    def worst_error() -> float:
        gen = torch.Generator().manual_seed(0)
        w, b = torch.randn(48, 40, generator=gen).to(dtype), torch.randn(48, generator=gen).to(dtype)
        worst = 0.0
        for rows in (1, 3, 6, 11):
            x = torch.randn(rows, 40, generator=gen).to(dtype)
            want = F.linear(x.float(), w.float(), b.float())
            scale = 1.0 if dtype == torch.float32 else want.abs().max().item()
            worst = max(worst, (apply(x, pack(w), b).float() - want).abs().max().item() / scale)
        return worst

    return check_host_kernel(device, dtype, worst_error, "panels result differs from F.linear", TOLERANCES)

