"""Compile checks: torch.compile a small function, run it, compare with eager, time the compile.

A backend that cannot compile for the device is recorded as its actual result, `unsupported` with the error (or
the missing toolchain, or the wrong numbers), and the check then takes the eager path on the same inputs: that is
what every later stage does instead, so it is a path fallback (compiled -> eager), recorded in the result's
details for the stage to log and count.
"""

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
SAMPLE = "matmul+silu+rms sample"


def sample_function(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = x @ w
    return torch.nn.functional.silu(h) * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)


def inductor_generates_for(device_type: str) -> bool | None:
    """Whether inductor has a code generator registered for the device type; None where torch does not say."""
    try:
        from torch._inductor.codegen.common import get_scheduling_for_device, init_backend_registration

        init_backend_registration()
        return get_scheduling_for_device(device_type) is not None
    except Exception:
        return None


def missing_toolchain(device: torch.device) -> str | None:
    if is_host(device):
        compiler = sysconfig.get_config_var("CXX") or "c++"
        candidates = [compiler.split()[0], "g++", "c++", "clang++"]
        if not any(shutil.which(c) for c in candidates):
            return "inductor on the CPU needs a C++ compiler and none was found (g++/clang++)"
    elif importlib.util.find_spec("triton") is None and inductor_generates_for(device.type):
        return f"inductor on {device.type} needs Triton and it is not installed"
    return None


def failure_reason(device: torch.device, backend: str, exc: BaseException) -> str:
    failed = f"torch.compile(backend={backend!r}) failed: {error_text(exc)}"
    if backend == "inductor" and inductor_generates_for(device.type) is False:
        return (f"inductor has no code generator for {device.type} devices (none is registered with "
                f"torch._inductor.codegen.common.register_backend_for_device); {failed}")
    return failed


def eager_fallback(backend: str, why: str, x: torch.Tensor, w: torch.Tensor, expected: torch.Tensor) -> dict:
    """The eager path on the same inputs, as the fallback every later stage takes instead of this backend."""
    try:
        _, max_rel = relative_error(sample_function(x, w), expected)
        eager = f"eager max_rel {max_rel:.2e} vs fp64"
    except Exception as exc:
        eager = f"eager failed too: {error_text(exc)}"
    return {"level": "path", "what": SAMPLE, "wanted": f"torch.compile(backend={backend!r})",
            "instead": "eager", "why": why, "eager": eager}


def check_compile(device: torch.device, backend: str) -> dict[str, Any]:
    x32, w32 = seeded_randn(16, 64, seed=21), seeded_randn(64, 32, seed=22)
    expected = sample_function(x32.double(), w32.double())  # on the host: a device may refuse float64
    x, w = x32.to(device), w32.to(device)
    result = compiled_result(device, backend, x, w, expected)
    if result["status"] != "supported":
        result["details"]["fallback"] = eager_fallback(backend, result["reason"], x, w, expected)
    return result


def compiled_result(device: torch.device, backend: str, x: torch.Tensor, w: torch.Tensor,
                    expected: torch.Tensor) -> dict[str, Any]:
    missing = missing_toolchain(device) if backend == "inductor" else None
    if missing:
        return unsupported(missing)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(sample_function, backend=backend, fullgraph=True)
        start = time.perf_counter()
        out = compiled(x, w)
        compile_s = time.perf_counter() - start
    except Exception as exc:
        return unsupported(failure_reason(device, backend, exc))
    finally:
        torch._dynamo.reset()
    _, max_rel = relative_error(out, expected)
    if max_rel > TOLERANCE:
        return unsupported(f"compiled result error {max_rel:.3g} > {TOLERANCE:g} against fp64", compile_s=compile_s)
    return supported(
        f"{SAMPLE} compiled fullgraph in {compile_s:.1f}s; float32 max_rel {max_rel:.2e} vs fp64",
        compile_s=round(compile_s, 3),
    )


def compile_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    return {name: (lambda device, b=name: check_compile(device, b)) for name in ("inductor", "aot_eager")}
