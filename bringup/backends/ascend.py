"""Huawei Ascend NPUs through torch_npu, which registers PrivateUse1 as `npu`."""

from bringup.backends.base import Hardware, SmiTool
from bringup.backends.privateuse1 import PrivateUse1Backend, registered_name


class AscendBackend(PrivateUse1Backend):
    visibility_variable = "ASCEND_RT_VISIBLE_DEVICES"
    vendor_default = "Huawei"
    hardware = (Hardware("npu", {"0x19e5": "Huawei"}, "ascend", ("dev/davinci[0-9]*",), "ASCEND_RT_VISIBLE_DEVICES"),)
    visibility_variables = ("ASCEND_RT_VISIBLE_DEVICES",)
    environment_prefixes = ("ASCEND_", "HCCL_")
    smi_tools = (SmiTool("npu-smi", ("info",), r"Version|^\|\s*\d+\s+\w"),)
    driver_files = {"usr/local/Ascend/driver/version.info": "ascend"}
    packages = ("torch_npu",)
    collective_libraries = {"npu": ("hccl", "Ascend's HCCL (registered by torch_npu)")}

    def __init__(self) -> None:
        super().__init__("npu")

    def build_support(self) -> dict[str, tuple[bool, str]]:
        return {"npu": (registered_name() == "npu", "the torch_npu extension is not installed or not imported")}
