"""Intel GPUs through torch.xpu."""

from typing import Any

from bringup.backends.module_backend import ModuleBackend


class XpuBackend(ModuleBackend):
    family = "xpu"
    torch_device_type = "xpu"
    module_name = "xpu"
    visibility_variable = "ZE_AFFINITY_MASK"
    vendor_default = "Intel"

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
