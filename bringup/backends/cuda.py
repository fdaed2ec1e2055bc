"""NVIDIA CUDA, and AMD ROCm (HIP builds of torch expose the same torch.cuda API)."""

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch

from bringup.backends.base import DeviceInfo, Hardware, SmiTool
from bringup.backends.module_backend import ModuleBackend


def is_rocm_build() -> bool:
    return getattr(torch.version, "hip", None) is not None


class CudaBackend(ModuleBackend):
    family = "cuda"
    torch_device_type = "cuda"
    module_name = "cuda"
    hardware = (
        Hardware("cuda", {"0x10de": "NVIDIA"}, "nvidia", ("dev/nvidia[0-9]*", "dev/nvidiactl"), "CUDA_VISIBLE_DEVICES"),
        Hardware("rocm", {"0x1002": "AMD"}, "amd-kfd", ("dev/kfd",), "HIP_VISIBLE_DEVICES"),
    )
    visibility_variables = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
    order_variables = ("CUDA_DEVICE_ORDER",)
    environment_prefixes = ("CUDA_", "CUBLAS_", "CUDNN_", "NCCL_", "HIP_", "ROCM_", "ROCR_", "HSA_", "MIOPEN_")
    smi_tools = (
        SmiTool("nvidia-smi", ("--query-gpu=index,name,driver_version,pci.bus_id,memory.total",
                               "--format=csv,noheader"), r"."),
        SmiTool("rocm-smi", ("--showproductname", "--showdriverversion"),
                r"Card series|Card model|Driver version|GFX"),
    )
    driver_files = {
        "proc/driver/nvidia/version": "nvidia",
        "sys/module/nvidia/version": "nvidia_module",
        "sys/module/amdgpu/version": "amdgpu",
        "opt/rocm/.info/version": "rocm",
    }
    kernel_modules = ("nvidia", "amdgpu")
    collective_libraries = {
        "cuda": ("nccl", "NCCL, NVIDIA's collective library"),
        "rocm": ("nccl", "RCCL, which ROCm builds of torch expose as the 'nccl' backend"),
    }

    @property
    def visibility_variable(self) -> str:  # type: ignore[override]
        return "HIP_VISIBLE_DEVICES" if is_rocm_build() else "CUDA_VISIBLE_DEVICES"

    @property
    def vendor_default(self) -> str:  # type: ignore[override]
        return "AMD" if is_rocm_build() else "NVIDIA"

    def family_of_device(self) -> str:
        return "rocm" if is_rocm_build() else "cuda"

    def build_support(self) -> dict[str, tuple[bool, str]]:
        version = torch.__version__
        return {
            "cuda": (torch.version.cuda is not None, f"this torch build ({version}) has no CUDA support"),
            "rocm": (is_rocm_build(), f"this torch build ({version}) has no ROCm support"),
        }

    def availability_facts(self) -> dict[str, str]:
        key = "rocm_available" if is_rocm_build() else "cuda_available"
        return {key: self.module_availability(torch.version.cuda is not None or is_rocm_build())}

    def order_warnings(self, devices: list[DeviceInfo], env: Mapping[str, str]) -> list[str]:
        cuda = [d for d in devices if d.id.startswith("cuda:")]
        if len(cuda) < 2 or env.get("CUDA_DEVICE_ORDER") == "PCI_BUS_ID":
            return []
        buses = [d.pci_bus_id for d in cuda]
        out_of_order = all(buses) and buses != sorted(buses)
        detail = (
            "and here it differs: " + ", ".join(f"{d.id}={d.pci_bus_id}" for d in cuda)
            if out_of_order
            else "so cuda:N may not be the N-th card by PCI bus id"
        )
        return [
            f"CUDA_DEVICE_ORDER is not PCI_BUS_ID: torch numbers devices fastest-first, {detail}; "
            "set CUDA_DEVICE_ORDER=PCI_BUS_ID for a stable order"
        ]

    def capture_graph(self, device: torch.device, step: Callable[[], None]) -> Callable[[], None] | None:
        stream = torch.cuda.Stream(device)
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for _ in range(2):
                step()
        torch.cuda.current_stream(device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=_graph_pool(device)):
            step()
        return graph.replay

    def peer_access(self, index: int, other: int) -> bool | None:
        return bool(torch.cuda.can_device_access_peer(index, other))

    def build_missing_reason(self) -> str:
        return f"this torch build ({torch.__version__}) has neither CUDA nor ROCm support"

    def not_available_reason(self) -> str:
        if torch.version.cuda is None and not is_rocm_build():
            return f"this torch build ({torch.__version__}) has neither CUDA nor ROCm support"
        var = self.visibility_variable
        if os.environ.get(var, None) == "":
            return f"{var} is set to an empty string, which hides every device"
        return "torch.cuda.is_available() is False: no driver loaded or no device node"

    def arch(self, props: Any) -> str | None:
        if props is None:
            return None
        gcn = getattr(props, "gcnArchName", None)
        if is_rocm_build() and gcn:
            return str(gcn)
        return f"sm_{props.major}{props.minor}"

    def pci_bus_id(self, props: Any) -> str | None:
        bus = getattr(props, "pci_bus_id", None)
        if props is None or bus is None:
            return None
        domain = getattr(props, "pci_domain_id", 0) or 0
        dev = getattr(props, "pci_device_id", 0) or 0
        return f"{domain:04x}:{bus:02x}:{dev:02x}.0"

    def extra(self, props: Any) -> dict[str, Any]:
        if props is None:
            return {}
        return {
            "compute_capability": f"{props.major}.{props.minor}",
            "multiprocessors": getattr(props, "multi_processor_count", None),
            "runtime": f"hip {torch.version.hip}" if is_rocm_build() else f"cuda {torch.version.cuda}",
        }

    def graph_api(self) -> str | None:
        return "torch.cuda.CUDAGraph" if hasattr(torch.cuda, "CUDAGraph") else None


_GRAPH_POOLS: dict[int, object] = {}


def _graph_pool(device: torch.device) -> object:
    """One memory pool for every graph captured on `device`: a private pool per capture (torch's default) holds
    each bucket's activations apart, and a runner captures one step per batch and context bucket. They are replayed
    one at a time, and each replay's output is copied out before the next, so they may share it."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _GRAPH_POOLS:
        _GRAPH_POOLS[index] = torch.cuda.graph_pool_handle()
    return _GRAPH_POOLS[index]
