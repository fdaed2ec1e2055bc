"""Intel GPUs through torch.xpu."""

from typing import Any

from bringup.backends.base import Hardware, SmiTool
from bringup.backends.module_backend import ModuleBackend

INTEL = "0x8086"


class XpuBackend(ModuleBackend):
    family = "xpu"
    torch_device_type = "xpu"
    module_name = "xpu"
    visibility_variable = "ZE_AFFINITY_MASK"
    vendor_default = "Intel"
    hardware = (Hardware("xpu", {INTEL: "Intel"}, "dri-render", ("dev/dri/renderD*",), "ZE_AFFINITY_MASK"),)
    visibility_variables = ("ZE_AFFINITY_MASK",)
    environment_prefixes = ("ZE_", "SYCL_", "ONEAPI_", "CCL_")
    smi_tools = (SmiTool("xpu-smi", ("discovery",), r"Device Name|Driver Version|PCI BDF"),)
    kernel_modules = ("i915", "xe")
    packages = ("intel_extension_for_pytorch",)
    collective_libraries = {"xpu": ("xccl", "oneCCL, exposed as 'xccl' in torch >= 2.7")}

    def build_support(self) -> dict[str, tuple[bool, str]]:
        import torch

        xpu = getattr(torch, "xpu", None)
        built = bool(xpu is not None and getattr(xpu, "_is_compiled", lambda: False)())
        return {"xpu": (built, f"this torch build ({torch.__version__}) has no XPU support")}

    def availability_facts(self) -> dict[str, str]:
        import torch

        return {"xpu_available": self.module_availability(bool(getattr(torch.version, "xpu", None)))}

    def integrated_guess(self, vendor_id: str, class_code: str, address: str) -> bool | None:
        """The one safe guess: an Intel display controller on the root bus is the CPU's iGPU."""
        on_root_bus = address.split(":")[1] == "00"
        return True if vendor_id == INTEL and class_code.startswith("0x03") and on_root_bus else None

    def not_available_reason(self) -> str:
        import torch

        if not getattr(torch.xpu, "_is_compiled", lambda: True)():
            return f"this torch build ({torch.__version__}) has no XPU support"
        return super().not_available_reason()

    def arch(self, props: Any) -> str | None:
        return getattr(props, "architecture", None) and str(props.architecture)

    def extra(self, props: Any) -> dict[str, Any]:
        if props is None:
            return {}
        keys = ("driver_version", "platform_name", "gpu_eu_count", "has_fp16", "has_fp64")
        return {k: getattr(props, k) for k in keys if hasattr(props, k)}

    def graph_api(self) -> str | None:
        import torch

        return "torch.xpu.XPUGraph" if hasattr(torch.xpu, "XPUGraph") else None
