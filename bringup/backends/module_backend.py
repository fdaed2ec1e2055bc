"""Shared logic for families exposed as a torch submodule (torch.cuda, torch.xpu, torch.<privateuse1>)."""

from typing import Any

import torch

from bringup.backends.base import Backend, DeviceInfo, device_count_text


def _call(obj: Any, name: str, *args: Any) -> Any:
    fn = getattr(obj, name, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:
        return None


class ModuleBackend(Backend):
    """A family whose runtime lives at torch.<module_name> with the usual device API."""

    module_name: str
    vendor_default: str | None = None

    def module(self) -> Any | None:
        return getattr(torch, self.module_name, None)

    def build_missing_reason(self) -> str:
        return f"this torch build ({torch.__version__}) has no torch.{self.module_name} module"

    def not_available_reason(self) -> str:
        return f"torch.{self.module_name}.is_available() is False (no driver, no device, or hidden)"

    def availability(self) -> tuple[bool, str]:
        mod = self.module()
        if mod is None:
            return False, self.build_missing_reason()
        if not _call(mod, "is_available"):
            return False, self.not_available_reason()
        return True, ""

    def module_availability(self, built: bool) -> str:
        """`not built`, `no (no usable device)` or `yes (N devices)`: the environment report's wording."""
        if not built:
            return "not built"
        if not self.availability()[0]:
            return "no (no usable device)"
        return device_count_text(self.device_count())

    def device_count(self) -> int:
        mod = self.module()
        if mod is None or not _call(mod, "is_available"):
            return 0
        return int(_call(mod, "device_count") or 0)

    def properties(self, index: int) -> Any | None:
        mod = self.module()
        return None if mod is None else _call(mod, "get_device_properties", index)

    def memory(self, index: int) -> tuple[int | None, int | None]:
        info, _ = self.memory_info(index)
        if info:
            free, total = info
            return int(total), int(free)
        props = self.properties(index)
        total = getattr(props, "total_memory", None)
        return (int(total) if total is not None else None), None

    def memory_source(self, index: int) -> str | None:
        _, source = self.memory_info(index)
        if source:
            return source
        has_total = getattr(self.properties(index), "total_memory", None) is not None
        return f"torch.{self.module_name}.get_device_properties().total_memory" if has_total else None

    def memory_info(self, index: int) -> tuple[tuple[int, int] | None, str | None]:
        """(free, total) bytes and the API that told them: the family's own mem_get_info, else torch.accelerator's
        memory API where this family is torch's current accelerator (an out-of-tree module may have only that).
        Both are queries: nothing is allocated, and the current device is left as it was."""
        mod = self.module()
        info = None if mod is None else _call(mod, "mem_get_info", index)
        if info:
            return info, f"torch.{self.module_name}.mem_get_info"
        if self.is_current_accelerator():
            info = _call(torch.accelerator, "get_memory_info", index)
            if info:
                return info, "torch.accelerator.get_memory_info"
        return None, None

    def is_current_accelerator(self) -> bool:
        """Whether torch.accelerator (torch 2.6 and later) speaks for this family's device type."""
        accelerator = getattr(torch, "accelerator", None)
        current = _call(accelerator, "current_accelerator") if accelerator is not None else None
        return current is not None and current.type == self.torch_device_type

    def synchronize(self, device: torch.device) -> None:
        mod = self.module()
        if mod is not None:
            mod.synchronize(device)

    def arch(self, props: Any) -> str | None:
        return None

    def pci_bus_id(self, props: Any) -> str | None:
        return None

    def family_of_device(self) -> str:
        return self.family

    def device_info(self, index: int) -> DeviceInfo:
        props = self.properties(index)
        total, free = self.memory(index)
        uuid = getattr(props, "uuid", None)
        integrated = getattr(props, "is_integrated", None)
        return DeviceInfo(
            id=self.device_string(index),
            backend=self.family_of_device(),
            name=str(getattr(props, "name", f"{self.family} device {index}")),
            vendor=self.vendor_default,
            arch=self.arch(props),
            pci_bus_id=self.pci_bus_id(props),
            integrated=bool(integrated) if integrated is not None else None,
            uuid=str(uuid) if uuid is not None else None,
            memory_total_bytes=total,
            memory_free_bytes=free,
            extra=self.extra(props),
        )

    def extra(self, props: Any) -> dict[str, Any]:
        return {}
