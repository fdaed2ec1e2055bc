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
from bringup.runner.weights.kernels.layout_constants import DEFINES, INT4_FORMATS, WEIGHT_GROUPS

KERNELS = Path(__file__).parent  # the weights kinds' kernels and their headers, which other kernels include
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


def _flags(folder: Path) -> list[str]:
    return [*FLAGS, f"-I{KERNELS}", f"-I{folder}", *(f"-D{name}={value}" for name, value in DEFINES.items()),
            f"-DBRINGUP_INT4_FORMATS={INT4_FORMATS}"]


def compile_args(source: Path, target: Path | str) -> list[str]:
    """The compiler's command line for one kernel library: the flags, the include folders, the layout constants."""
    return [_compiler(), *_flags(source.parent), str(source), "-o", str(target)]


def library_path(source_name: str, folder: Path = KERNELS) -> Path:
    """Where the library built from <folder>/<source_name> is cached, keyed by everything that shapes it."""
    source = folder / source_name
    compiler = _compiler()
    version = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=30).stdout
    headers = [h.read_text() for h in sorted({*KERNELS.glob("*.h"), *folder.glob("*.h")})]  # what it may include
    key = hashlib.sha256("\n".join([source.read_text(), *headers, compiler, version, *_flags(folder),
                                    _cpu_signature()]).encode()).hexdigest()[:16]
    return cache_dir() / f"{source.stem}-{key}.so"


@functools.lru_cache(maxsize=8)
def load(source_name: str, folder: Path = KERNELS) -> ctypes.CDLL:
    """The library built from <folder>/<source_name> (built now if not cached), checked to hold every layout constant
    as Python lays the weights out; KernelUnavailable if impossible."""
    source, target = folder / source_name, library_path(source_name, folder)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
        os.close(fd)
        try:
            done = subprocess.run(compile_args(source, tmp), capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
                raise KernelUnavailable(f"{Path(_compiler()).name} failed to build {source.name}: {last}")
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    lib = ctypes.CDLL(str(target))
    _check_layout(lib, source_name)
    return lib


def _check_layout(lib: ctypes.CDLL, source_name: str) -> None:
    """KernelUnavailable unless the library reports every layout constant as DEFINES has it, and each kernel format's
    weight group as WEIGHT_GROUPS has it."""
    report = getattr(lib, "bringup_layout_constant", None)
    if report is None:
        raise KernelUnavailable(f"{source_name}'s library reports no layout constants (bringup_layout_constant)")
    report.argtypes, report.restype = [ctypes.c_char_p], ctypes.c_int64
    wrong = [f"{name} = {report(name.encode())} (expected {value})" for name, value in DEFINES.items()
             if report(name.encode()) != value]
    group = lib.bringup_weight_group
    group.argtypes, group.restype = [ctypes.c_int64], ctypes.c_int64
    expected = {**WEIGHT_GROUPS, max(WEIGHT_GROUPS) + 1: -1}  # and no format beyond them
    wrong += [f"the group of format {code} = {group(code)} (expected {size})" for code, size in expected.items()
              if group(code) != size]
    if wrong:
        raise KernelUnavailable(f"{source_name} was built with other layout constants: {', '.join(wrong)}")


# the C signature every linear kernel entry point shares: (x, m, k, weights, n, weight stride, bias, out, threads)
LINEAR_ARGTYPES = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


def load_linear(source_name: str, entry_points: list[str]) -> ctypes.CDLL:
    """A linear-kernel library whose entry points take LINEAR_ARGTYPES."""
    lib = load(source_name)
    for name in entry_points:
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = LINEAR_ARGTYPES, None
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
