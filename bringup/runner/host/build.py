"""Build bringup's own host (CPU) kernels once with the system C++ compiler and load them with ctypes.

Each library is compiled with `-O3 -march=native -fopenmp` into a per-user cache keyed by the source (and the
shared headers beside it), the compiler, the flags and the CPU, so a rebuild happens only when one of those
changes. The build goes to a temporary file renamed into place, so a concurrent or interrupted build never
leaves a partial library. torch is imported first, so the kernels join torch's OpenMP runtime (the same
`libgomp.so.1`).
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
from collections.abc import Callable
from pathlib import Path

import torch  # loaded before any kernel library: its OpenMP runtime is the one they use

from bringup.backends.host import is_host
from bringup.errors import exception_line

KERNELS = Path(__file__).parent / "kernels"
FLAGS = ("-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
BUILD_TIMEOUT_S = 180


class KernelUnavailable(RuntimeError):
    """A kernel cannot be built or loaded here; the message says why."""


class HostKernelInputError(ValueError):
    """A host kernel was handed something it cannot read safely; raised before any pointer reaches C++."""


def require_host_tensor(name: str, t: torch.Tensor, dtype: torch.dtype, dims: int, contiguous: bool = False) -> None:
    """HostKernelInputError unless `t` is a dense host tensor of `dtype` with `dims` dimensions (and contiguous)."""
    if not is_host(t.device):
        raise HostKernelInputError(f"{name} is on {t.device}; a host kernel reads host (cpu) memory only")
    if t.layout != torch.strided:
        raise HostKernelInputError(f"{name} has layout {t.layout}; a host kernel reads dense (torch.strided) tensors")
    if t.dtype != dtype:
        raise HostKernelInputError(f"{name} is {t.dtype}; the kernel reads {dtype} only")
    if t.dim() != dims:
        raise HostKernelInputError(f"{name} has shape {list(t.shape)}; expected {dims} dimensions")
    if contiguous and not t.is_contiguous():
        raise HostKernelInputError(f"{name} is not contiguous (strides {list(t.stride())}); the kernel reads it "
                                   "as one dense block")


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


def library_path(source_name: str) -> Path:
    """Where the library built from kernels/<source_name> is cached, keyed by everything that shapes it."""
    source = KERNELS / source_name
    compiler = _compiler()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    headers = [h.read_text() for h in sorted(KERNELS.glob("*.h"))]  # what the sources may include
    key = hashlib.sha256("\n".join([source.read_text(), *headers, compiler, version, *FLAGS, _cpu_signature()])
                         .encode()).hexdigest()[:16]
    return cache_dir() / f"{source.stem}-{key}.so"


@functools.lru_cache(maxsize=8)
def load(source_name: str) -> ctypes.CDLL:
    """The library built from kernels/<source_name> (built now if not cached); KernelUnavailable if impossible."""
    source, compiler, target = KERNELS / source_name, _compiler(), library_path(source_name)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            done = subprocess.run([compiler, *FLAGS, str(source), "-o", tmp], capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
                raise KernelUnavailable(f"{Path(compiler).name} failed to build {source.name}: {last}")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return ctypes.CDLL(str(target))


# the C signature every linear kernel entry point shares: (x, m, k, weights, n, weight stride, bias, out, threads)
LINEAR_ARGTYPES = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


def load_linear(source_name: str, entry_points: list[str], layout_fn: str, expected: int) -> ctypes.CDLL:
    """A linear-kernel library whose entry points take LINEAR_ARGTYPES, checked to be built for the layout this
    Python expects (`layout_fn()` returns `expected`: the panel width, the int4 group)."""
    lib = load(source_name)
    for name in entry_points:
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = LINEAR_ARGTYPES, None
    built = getattr(lib, layout_fn)()
    if built != expected:
        raise KernelUnavailable(f"{source_name} was built with {layout_fn}() = {built}, expected {expected}")
    return lib


def check_host_kernel(device: torch.device, dtype: torch.dtype, worst_error: Callable[[], float],
                      mismatch: str, tolerances: dict[torch.dtype, float] | None = None) -> str | None:
    """None when a host kernel built for `dtype` builds, runs here and `worst_error()` (its largest difference
    from the reference path, relative for low precision) is within the dtype's tolerance (float32: 1e-4);
    otherwise why not."""
    tolerances = tolerances or {torch.float32: 1e-4}
    if not is_host(device):
        return f"a host-memory kernel; tensors on {device} are not in host memory"
    if dtype not in tolerances:
        names = " and ".join(str(d).removeprefix("torch.") for d in tolerances)
        return f"built for {names} only, not {str(dtype).removeprefix('torch.')}"
    try:
        worst = worst_error()
    except KernelUnavailable as exc:
        return str(exc)
    except (OSError, subprocess.SubprocessError) as exc:
        return exception_line(exc, 160)
    return None if worst <= tolerances[dtype] else f"{mismatch} by {worst:.2g}"
