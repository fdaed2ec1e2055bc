"""Match what the OS has with what torch can use, and say why a device is not usable.

Which vendor, driver nodes and visibility variable belong to which family is read from the registered
backends (their `hardware`), never from a table here."""

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from bringup.backends.base import Backend, DeviceInfo, Hardware
from bringup.backends.registry import registered
from bringup.backends.selection.system import PciDevice, SystemScan


def visibility_variables(backends: list[Backend] | None = None) -> tuple[str, ...]:
    """Every variable that decides which devices torch sees, then those that decide its numbering: the one list,
    gathered from the backends."""
    backends = registered() if backends is None else backends
    names = [v for b in backends for v in b.visibility_variables] + [v for b in backends for v in b.order_variables]
    return tuple(dict.fromkeys(names))


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


def build_support(backends: list[Backend] | None = None) -> dict[str, tuple[bool, str]]:
    """For each hardware family: does this torch build contain its backend at all (before any driver question)?"""
    backends = registered() if backends is None else backends
    support: dict[str, tuple[bool, str]] = {}
    for backend in backends:
        support |= {name: found for name, found in backend.build_support().items() if name not in support}
    return support


def hardware_by_vendor(backends: list[Backend]) -> dict[str, tuple[Backend, Hardware]]:
    """PCI vendor id -> the backend and hardware that drive it (the first backend declaring it)."""
    found: dict[str, tuple[Backend, Hardware]] = {}
    for backend in backends:
        for hw in backend.hardware:
            for vendor_id in hw.pci_vendors:
                found.setdefault(vendor_id, (backend, hw))
    return found


def explain_unusable(
    pci: PciDevice, hw: Hardware, scan: SystemScan, support: dict[str, tuple[bool, str]], env: Mapping[str, str]
) -> str:
    built, why_not_built = support.get(hw.name, (False, f"bringup knows no torch backend for {hw.name}"))
    if not built:
        return why_not_built
    if pci.driver is None:
        return "no kernel driver is bound to it"
    if hw.node_group and hw.node_group not in scan.device_nodes:
        return f"no driver device node ({hw.node_group} nodes under /dev are missing)"
    var = hw.visibility_variable
    if var and var in env:
        return f"hidden by {var}={env[var]!r}"
    return "torch does not enumerate it although driver and nodes exist (check the driver version and dmesg)"


def reconcile(
    scan: SystemScan,
    torch_devices: list[DeviceInfo],
    support: dict[str, tuple[bool, str]] | None = None,
    env: Mapping[str, str] | None = None,
    backends: list[Backend] | None = None,
) -> list[PhysicalDevice]:
    backends = registered() if backends is None else backends
    support = build_support(backends) if support is None else support
    env = os.environ if env is None else env
    drivers = hardware_by_vendor(backends)
    by_bus = {d.pci_bus_id.lower(): d for d in torch_devices if d.pci_bus_id}
    result = []
    for pci in scan.pci:
        backend, hw = drivers.get(pci.vendor_id, (None, None))
        family = hw.name if hw is not None else None
        match = by_bus.get(pci.address.lower())
        guess = backend.integrated_guess(pci.vendor_id, pci.class_code, pci.address) if backend else None
        integrated = match.integrated if match and match.integrated is not None else guess
        if match is not None:
            result.append(PhysicalDevice(pci, family, integrated, match.id, True, ""))
        elif hw is None:
            reason = f"no torch backend drives {pci.vendor} devices (a plain display adapter for this machine)"
            result.append(PhysicalDevice(pci, None, integrated, None, False, reason))
        else:
            reason = explain_unusable(pci, hw, scan, support, env)
            result.append(PhysicalDevice(pci, family, integrated, None, False, reason))
    return result


def order_warnings(torch_devices: list[DeviceInfo], env: Mapping[str, str] | None = None,
                   backends: list[Backend] | None = None) -> list[str]:
    """Warn where torch's device numbering may not follow PCI bus order (each backend knows its own rule)."""
    backends = registered() if backends is None else backends
    env = os.environ if env is None else env
    return [warning for backend in backends for warning in backend.order_warnings(torch_devices, env)]
