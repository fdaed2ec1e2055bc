"""Intel Gaudi (Habana) accelerators through the habana_frameworks extension's torch.hpu."""

import torch

from bringup.backends.base import Hardware
from bringup.backends.module_backend import ModuleBackend

PATTERNS = ("dev/accel/accel_controlD*", "dev/hl[0-9]*")


class HabanaBackend(ModuleBackend):
    family = "hpu"
    torch_device_type = "hpu"
    module_name = "hpu"
    visibility_variable = "HABANA_VISIBLE_DEVICES"
    vendor_default = "Intel"
    hardware = (Hardware("hpu", {"0x1da3": "Habana Labs (Intel)"}, "habana", PATTERNS, "HABANA_VISIBLE_DEVICES"),)
    visibility_variables = ("HABANA_VISIBLE_DEVICES",)
    environment_prefixes = ("PT_HPU_", "HABANA_")
    kernel_modules = ("habanalabs",)
    collective_libraries = {"hpu": ("hccl", "Habana's HCCL")}

    def present(self) -> bool:
        return hasattr(torch, "hpu")

    def build_support(self) -> dict[str, tuple[bool, str]]:
        return {"hpu": (hasattr(torch, "hpu"), "the Habana (habana_frameworks) extension is not installed")}
