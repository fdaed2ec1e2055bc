"""Compile checks: torch.compile a small function, run it, compare with eager, time the compile."""

import importlib.util
import shutil
import sysconfig
import time
from collections.abc import Callable
from typing import Any

import torch

from bringup.backends.host import is_host
from bringup.probes.capabilities.numerics import relative_error, seeded_randn
from bringup.probes.capabilities.result import error_text, supported, unsupported

TOLERANCE = 1e-4


def sample_function(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w
    return torch.nn.functional.silu(h) * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)


def missing_toolchain(device: torch.device) -> str | None:
    if is_host(device):
        compiler = sysconfig.get_config_var("CXX") or "c++"
        candidates = [compiler.split()[0], "g++", "c++", "clang++"]
        if not any(shutil.which(c) for c in candidates):
            return "inductor on the CPU needs a C++ compiler and none was found (g++/clang++)"
    elif importlib.util.find_spec("triton") is None:
        return f"inductor on {device.type} needs Triton and it is not installed"
    return None


def check_compile(device: torch.device, backend: str) -> dict[str, Any]:
    if backend == "inductor":
        missing = missing_toolchain(device)
        if missing:
            return unsupported(missing)
    x, w = seeded_randn(16, 64, seed=21).to(device), seeded_randn(64, 32, seed=22).to(device)
    expected = sample_function(x.double().cpu(), w.double().cpu())
    torch._dynamo.reset()
    try:
        compiled = torch.compile(sample_function, backend=backend, fullgraph=True)
        start = time.perf_counter()
        out = compiled(x, w)
        compile_s = time.perf_counter() - start
    except Exception as exc:
        return unsupported(f"torch.compile(backend={backend!r}) failed: {error_text(exc)}")
    finally:
        torch._dynamo.reset()
    _, max_rel = relative_error(out, expected)
    if max_rel > TOLERANCE:
        return unsupported(f"compiled result error {max_rel:.3g} > {TOLERANCE:g} against fp64", compile_s=compile_s)
    return supported(
        f"matmul+silu+rms sample compiled fullgraph in {compile_s:.1f}s; float32 max_rel {max_rel:.2e} vs fp64",
        compile_s=round(compile_s, 3),
    )


def compile_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    return {name: (lambda device, b=name: check_compile(device, b)) for name in ("inductor", "aot_eager")}
