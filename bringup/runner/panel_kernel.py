"""The "panels" linear kernel for host memory: built once with the system C++ compiler, loaded with ctypes.

One-row (decode) products are memory-bound; a BLAS GEMV may stream the weights on one core. This kernel
stores W as panels of 16 output columns ([k][16] each, contiguous) and splits the panels across the
process's OpenMP threads, so every core streams weights (kernels/panel_linear.cpp). It is one of the
layouts the start-up chooser times against the others; it is used only where it measured faster and
its result matched F.linear.

The library is built with `-O3 -march=native -fopenmp` into a per-user cache keyed by the source, the
compiler, the flags and the CPU, so a rebuild happens only when one of those changes. Under
torch.compile the kernel is an opaque custom op (`bringup::panel_linear`).
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

SOURCE = Path(__file__).parent / "kernels" / "panel_linear.cpp"
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
PANEL = 16
BUILD_TIMEOUT_S = 180


class KernelUnavailable(RuntimeError):
    """The kernel cannot be built or loaded here; the message says why."""


def cache_dir() -> Path:
    if os.environ.get("BRINGUP_KERNEL_CACHE"):
        return Path(os.environ["BRINGUP_KERNEL_CACHE"])
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bringup" / "kernels"


def _compiler() -> str:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    raise KernelUnavailable("no C++ compiler found (set CXX, or install g++)")


def _cpu_signature() -> str:
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = platform.processor()
    return f"{platform.machine()} {flags}"


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    """Build (once per source, compiler and CPU) and load the kernel library; KernelUnavailable if impossible."""
    compiler = _compiler()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    key = hashlib.sha256("\n".join([SOURCE.read_text(), compiler, version, *FLAGS, _cpu_signature()])
                         .encode()).hexdigest()[:16]
    target = cache_dir() / f"panel_linear-{key}.so"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            done = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", tmp], capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
                raise KernelUnavailable(f"{Path(compiler).name} failed to build {SOURCE.name}: {last}")
            os.replace(tmp, target)  # atomic: a concurrent or interrupted build never leaves a partial library
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(target))  # torch is imported, so its OpenMP runtime is the one the kernel joins
    fn = lib.bringup_panel_linear
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                   ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    fn.restype = None
    if lib.bringup_panel_width() != PANEL:
        raise KernelUnavailable(f"{target} has panel width {lib.bringup_panel_width()}, expected {PANEL}")
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
    if device.type != "cpu":
        return f"a host-memory kernel; tensors on {device} are not in host memory"
    if dtype != torch.float32:
        return f"built for float32 only, not {dtype}"
    try:
        gen = torch.Generator().manual_seed(0)
        w, b = torch.randn(48, 40, generator=gen), torch.randn(48, generator=gen)
        worst = 0.0
        for rows in (1, 3, 6, 11):
            x = torch.randn(rows, 40, generator=gen)
            worst = max(worst, (apply(x, pack(w), b) - F.linear(x, w, b)).abs().max().item())
    except KernelUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ''}"
    return None if worst <= 1e-4 else f"panels result differs from F.linear by {worst:.2g}"
