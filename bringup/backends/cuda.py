"""NVIDIA CUDA, and AMD ROCm (HIP builds of torch expose the same torch.cuda API)."""

import os
from typing import Any

import torch

from bringup.backends.module_backend import ModuleBackend


def is_rocm_build() -> bool:
    return getattr(torch.version, "hip", None) is not None


class CudaBackend(ModuleBackend):
    family = "cuda"
    torch_device_type = "cuda"
    module_name = "cuda"

    @property
    def visibility_variable(self) -> str:  # type: ignore[override]
        return "HIP_VISIBLE_DEVICES" if is_rocm_build() else "CUDA_VISIBLE_DEVICES"

    @property
    def vendor_default(self) -> str:  # type: ignore[override]
        return "AMD" if is_rocm_build() else "NVIDIA"

    def family_of_device(self) -> str:
        return "rocm" if is_rocm_build() else "cuda"

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
