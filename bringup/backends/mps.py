"""Apple GPUs through torch.mps (a single, integrated device)."""

import platform

import torch

from bringup.backends.base import Backend, DeviceInfo, Hardware


class MpsBackend(Backend):
    family = "mps"
    torch_device_type = "mps"
    visibility_variable = None
    hardware = (Hardware("mps", {"0x106b": "Apple"}),)
    collective_libraries = {"mps": ("gloo", "gloo on CPU tensors: torch has no collective library for MPS")}

    def build_support(self) -> dict[str, tuple[bool, str]]:
        mps = getattr(torch.backends, "mps", None)
        return {"mps": (bool(mps and mps.is_built()), f"this torch build ({torch.__version__}) was built without MPS")}

    def availability_facts(self) -> dict[str, str]:
        if torch.backends.mps.is_available():
            return {"mps_available": "yes"}
        return {"mps_available": "no" if torch.backends.mps.is_built() else "not built"}

    def availability(self) -> tuple[bool, str]:
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_built():
            return False, f"this torch build ({torch.__version__}) was built without MPS"
        if not mps.is_available():
            return False, "torch.backends.mps.is_available() is False (needs macOS 12.3+ on Apple silicon)"
        return True, ""

    def device_count(self) -> int:
        return 1 if self.availability()[0] else 0

    def device_string(self, index: int) -> str:
        return "mps"

    def memory(self, index: int) -> tuple[int | None, int | None]:
        try:
            total = int(torch.mps.recommended_max_memory())
            return total, total - int(torch.mps.driver_allocated_memory())
        except Exception:
            return None, None

    def memory_source(self, index: int) -> str | None:
        return "torch.mps.recommended_max_memory() less driver_allocated_memory()"

    def device_info(self, index: int) -> DeviceInfo:
        total, free = self.memory(index)
        return DeviceInfo(
            id="mps", backend="mps", name=f"Apple GPU ({platform.machine()})", vendor="Apple",
            arch=platform.machine(), integrated=True, memory_total_bytes=total, memory_free_bytes=free,
        )

    def synchronize(self, device: torch.device) -> None:
        torch.mps.synchronize()
