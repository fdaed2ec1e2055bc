"""The quantized kernel's other instruction-set paths, built here for older x86 CPUs and run on this one: AVX2
without VNNI (`vpmaddubsw`, the path of a Zen 3), AVX-VNNI in 256-bit registers (an Alder Lake), and plain C. Each
must match the module-level reference as the path this CPU builds natively does (the start-up check only ever runs
the native one)."""

from __future__ import annotations

import ctypes
import platform
import subprocess
from pathlib import Path

import pytest
import torch

from bringup.runner.weights.formats.integer import KERNEL_FORMATS, reference_linear
from bringup.runner.weights.kernels import build as host_build
from bringup.runner.weights.kernels import quantized as quantized_kernel
from bringup.runner.weights.kinds import INT4, INT4_G64, INT4_G128, INT8
from tests.runner.host_compiler import needs_compiler

# -march targets and the CPU features running their code needs
TARGETS = {"x86-64": (), "haswell": ("avx2", "fma", "f16c"), "alderlake": ("avx2", "fma", "f16c", "avx_vnni")}
SHAPES = ((37, 128, 1), (64, 640, 3), (5, 128, 5), (48, 1536, 2), (21, 256, 4))  # rows, in, rows of x


def cpu_flags() -> set[str]:
    try:
        line = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return set()
    return set(line.split(":", 1)[1].split())


@needs_compiler
@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 instruction-set paths")
@pytest.mark.parametrize("target", list(TARGETS))
def test_each_instruction_set_path_matches_the_reference(tmp_path, target):
    missing = [f for f in TARGETS[target] if f not in cpu_flags()]
    if missing:
        pytest.skip(f"this CPU cannot run -march={target} code (no {', '.join(missing)})")
    library = tmp_path / f"quantized_{target}.so"
    command = host_build.compile_args(host_build.KERNELS / "quantized_linear.cpp", library)
    command = [f if f != "-march=native" else f"-march={target}" for f in command]
    subprocess.run(command, check=True, timeout=host_build.BUILD_TIMEOUT_S)
    lib = ctypes.CDLL(str(library))
    built = {"x86-64": 0, "haswell": 256, "alderlake": 256}[target]
    assert lib.bringup_quantized_vector_bits() == built
    entry = getattr(lib, quantized_kernel.ENTRY_POINT)
    entry.argtypes, entry.restype = [ctypes.c_int64, *host_build.LINEAR_ARGTYPES], None
    for scheme in (INT8, INT4, INT4_G64, INT4_G128):
        for n, k, m in SHAPES:
            if k % {INT4_G64: 64, INT4_G128: 128}.get(scheme, 32):
                continue
            gen = torch.Generator().manual_seed(n + k + m)
            w, bias = torch.randn(n, k, generator=gen), torch.randn(n, generator=gen)
            x = torch.randn(m, k, generator=gen)
            stored, y = quantized_kernel.QUANTIZE[scheme](w), torch.empty(m, n)
            entry(KERNEL_FORMATS[scheme], x.data_ptr(), m, k, stored.data_ptr(), k, n, bias.data_ptr(), y.data_ptr(), n)
            want = reference_linear(x, quantized_kernel.DEQUANTIZE[scheme](stored), bias)
            assert (y - want).abs().max().item() <= 1e-4 * want.abs().max().item(), (scheme, n, k, m)
