"""Feature checks: graph capture, pinned host memory, peer access between devices, quantized matmul kernels."""

from collections.abc import Callable
from typing import Any

import torch

from bringup.backends.host import is_host
from bringup.backends.registry import backend_for
from bringup.probes.capabilities.numerics import relative_error, seeded_randn
from bringup.probes.capabilities.quantized import quantized_checks
from bringup.probes.capabilities.result import error_text, supported, unknown, unsupported


def check_graphs(device: torch.device) -> dict[str, Any]:
    backend = backend_for(device)
    api = backend.graph_api()
    if api is None:
        return unsupported(f"the {device.type} backend offers no graph-capture API")
    a, b = seeded_randn(64, 64, seed=31).to(device), seeded_randn(64, 64, seed=32).to(device)
    result: dict[str, torch.Tensor] = {}

    def step() -> None:
        result["out"] = a @ b + 1

    try:
        replay = backend.capture_graph(device, step)
        if replay is None:
            return unknown(f"{api} exists, but bringup has no executed check for it yet")
        a.copy_(seeded_randn(64, 64, seed=33).to(device))
        replay()
        backend.synchronize(device)
    except Exception as exc:
        return unsupported(f"{api} capture/replay failed: {error_text(exc)}")
    expected = seeded_randn(64, 64, seed=33).double() @ seeded_randn(64, 64, seed=32).double() + 1
    _, max_rel = relative_error(result["out"], expected)
    if max_rel > 1e-2:
        return unsupported(f"replayed graph gave wrong numbers after input change: max_rel {max_rel:.3g}")
    return supported(f"captured matmul+add, replayed on new input: max_rel {max_rel:.2e} (TF32 allowed)")


def check_pinned_memory(device: torch.device) -> dict[str, Any]:
    if is_host(device):
        return unsupported("the device is the host itself: there is no host-to-device copy to pin memory for")
    try:
        host = seeded_randn(1024, 256, seed=41).pin_memory()
        if not host.is_pinned():
            return unsupported("pin_memory() returned a tensor that is not pinned")
        on_device = host.to(device, non_blocking=True)
        backend_for(device).synchronize(device)
        same = torch.equal(on_device.cpu(), host)
    except Exception as exc:
        return unsupported(f"pinned allocation or async copy failed: {error_text(exc)}")
    if not same:
        return unsupported("non-blocking copy from pinned memory arrived with different values")
    return supported("pinned 1 MiB host tensor, non_blocking copy to device, values identical")


def check_peer_access(device: torch.device) -> dict[str, Any]:
    backend = backend_for(device)
    count = backend.device_count()
    if count < 2:
        return unsupported(f"needs two {device.type} devices; this machine has {count}")
    index = device.index or 0
    other = torch.device(device.type, 1 if index == 0 else 0)
    try:
        src = seeded_randn(512, 512, seed=51).to(device)
        dst = src.to(other)
        backend.synchronize(other)
        same = torch.equal(dst.cpu(), src.cpu())
    except Exception as exc:
        return unsupported(f"copy {device} -> {other} failed: {error_text(exc)}")
    direct = backend.peer_access(index, other.index)
    if not same:
        return unsupported(f"copy {device} -> {other} changed values")
    says = f"unknown (the {backend.family} backend does not tell)" if direct is None else ("yes" if direct else "no")
    return supported(f"copied 1 MiB {device} -> {other} exactly; direct peer access: {says}", direct=direct)


def feature_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    return {"graphs": check_graphs, "pinned_memory": check_pinned_memory, "peer_access": check_peer_access,
            **quantized_checks()}
