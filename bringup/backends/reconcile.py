"""Match what the OS has with what torch can use, and say why a device is not usable."""

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import torch

from bringup.backends.base import DeviceInfo
from bringup.backends.cuda import is_rocm_build
from bringup.backends.privateuse1 import registered_name
from bringup.backends.system import PciDevice, SystemScan

VENDOR_FAMILY = {
    "0x10de": "cuda",
    "0x1002": "rocm",
    "0x8086": "xpu",
    "0x19e5": "npu",
    "0x1da3": "hpu",
    "0x106b": "mps",
}
FAMILY_NODES = {"cuda": "nvidia", "rocm": "amd-kfd", "xpu": "dri-render", "npu": "ascend", "hpu": "habana"}
FAMILY_VISIBILITY = {
    "cuda": "CUDA_VISIBLE_DEVICES",
    "rocm": "HIP_VISIBLE_DEVICES",
    "xpu": "ZE_AFFINITY_MASK",
    "npu": "ASCEND_RT_VISIBLE_DEVICES",
    "hpu": "HABANA_VISIBLE_DEVICES",
}
VISIBILITY_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
    "ASCEND_RT_VISIBLE_DEVICES",
    "HABANA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
)


@dataclass
class PhysicalDevice:
    pci: PciDevice
    family: str | None
    integrated: bool | None
    torch_id: str | None
    usable: bool
    reason: str

    def to_dict(self) -> dict:
        data = asdict(self)
        data["pci"] = self.pci.to_dict()
        return data


def build_support() -> dict[str, tuple[bool, str]]:
    """For each family: does this torch build contain its backend at all (before any driver question)?"""
    version = torch.__version__
    xpu = getattr(torch, "xpu", None)
    xpu_built = bool(xpu is not None and getattr(xpu, "_is_compiled", lambda: False)())
    mps = getattr(torch.backends, "mps", None)
    return {
        "cuda": (torch.version.cuda is not None, f"this torch build ({version}) has no CUDA support"),
        "rocm": (is_rocm_build(), f"this torch build ({version}) has no ROCm support"),
        "xpu": (xpu_built, f"this torch build ({version}) has no XPU support"),
        "npu": (registered_name() == "npu", "the torch_npu extension is not installed or not imported"),
        "hpu": (hasattr(torch, "hpu"), "the Habana (habana_frameworks) extension is not installed"),
        "mps": (bool(mps and mps.is_built()), f"this torch build ({version}) was built without MPS"),
    }


def guess_integrated(pci: PciDevice) -> bool | None:
    """Only the one safe guess: an Intel display controller on the root bus is the CPU's iGPU."""
    if pci.vendor_id == "0x8086" and pci.class_code.startswith("0x03") and pci.address.split(":")[1] == "00":
        return True
    return None


def explain_unusable(
    pci: PciDevice, family: str, scan: SystemScan, support: dict[str, tuple[bool, str]], env: Mapping[str, str]
) -> str:
    built, why_not_built = support.get(family, (False, f"bringup knows no torch backend for {family}"))
    if not built:
        return why_not_built
    if pci.driver is None:
        return "no kernel driver is bound to it"
    node_group = FAMILY_NODES.get(family)
    if node_group and node_group not in scan.device_nodes:
        return f"no driver device node ({node_group} nodes under /dev are missing)"
    var = FAMILY_VISIBILITY.get(family)
    if var and var in env:
        return f"hidden by {var}={env[var]!r}"
    return "torch does not enumerate it although driver and nodes exist (check the driver version and dmesg)"


def reconcile(
    scan: SystemScan,
    torch_devices: list[DeviceInfo],
    support: dict[str, tuple[bool, str]] | None = None,
    env: Mapping[str, str] | None = None,
) -> list[PhysicalDevice]:
    support = build_support() if support is None else support
    env = os.environ if env is None else env
    by_bus = {d.pci_bus_id.lower(): d for d in torch_devices if d.pci_bus_id}
    result = []
    for pci in scan.pci:
        family = VENDOR_FAMILY.get(pci.vendor_id)
        match = by_bus.get(pci.address.lower())
        integrated = match.integrated if match and match.integrated is not None else guess_integrated(pci)
        if match is not None:
            result.append(PhysicalDevice(pci, family, integrated, match.id, True, ""))
        elif family is None:
            reason = f"no torch backend drives {pci.vendor} devices (a plain display adapter for this machine)"
            result.append(PhysicalDevice(pci, None, integrated, None, False, reason))
        else:
            reason = explain_unusable(pci, family, scan, support, env)
            result.append(PhysicalDevice(pci, family, integrated, None, False, reason))
    return result


def order_warnings(torch_devices: list[DeviceInfo], env: Mapping[str, str] | None = None) -> list[str]:
    """Warn where torch's device numbering may not follow PCI bus order."""
    env = os.environ if env is None else env
    warnings = []
    cuda = [d for d in torch_devices if d.id.startswith("cuda:")]
    if len(cuda) > 1 and env.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        buses = [d.pci_bus_id for d in cuda]
        out_of_order = all(buses) and buses != sorted(buses)
        detail = (
            "and here it differs: " + ", ".join(f"{d.id}={d.pci_bus_id}" for d in cuda)
            if out_of_order
            else "so cuda:N may not be the N-th card by PCI bus id"
        )
        warnings.append(
            f"CUDA_DEVICE_ORDER is not PCI_BUS_ID: torch numbers devices fastest-first, {detail}; "
            "set CUDA_DEVICE_ORDER=PCI_BUS_ID for a stable order"
        )
    return warnings
