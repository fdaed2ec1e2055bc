"""Out-of-tree backends registered under PrivateUse1 (Ascend `npu`, and others) by their own name."""

import torch

from bringup.backends.module_backend import ModuleBackend

KNOWN_VISIBILITY = {"npu": "ASCEND_RT_VISIBLE_DEVICES"}
KNOWN_VENDOR = {"npu": "Huawei"}


def registered_name() -> str | None:
    """The name an extension gave PrivateUse1, or None when nothing renamed it."""
    try:
        name = torch._C._get_privateuse1_backend_name()
    except Exception:
        return None
    return None if name in ("privateuse1", "privateuseone") else name


class PrivateUse1Backend(ModuleBackend):
    def __init__(self, name: str | None = None) -> None:
        self.name = name or registered_name() or "privateuse1"
        self.family = self.name
        self.torch_device_type = self.name
        self.module_name = self.name
        self.visibility_variable = KNOWN_VISIBILITY.get(self.name)
        self.vendor_default = KNOWN_VENDOR.get(self.name)

    def build_missing_reason(self) -> str:
        if self.name == "privateuse1":
            return "no out-of-tree backend has registered PrivateUse1 in this process (import its extension)"
        return f"backend {self.name!r} is registered but torch.{self.name} is missing"
