"""Everything `bringup devices` reports: torch's families and devices, the OS's devices, reconciled."""

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bringup.backends.base import DeviceInfo
from bringup.backends.registry import all_backends
from bringup.backends.selection.reconcile import PhysicalDevice, order_warnings, reconcile, visibility_variables
from bringup.backends.selection.system import SystemScan, scan_system


@dataclass
class FamilyStatus:
    family: str
    usable: bool
    reason: str
    visibility_variable: str | None
    devices: list[DeviceInfo] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "family": self.family,
            "usable": self.usable,
            "reason": self.reason,
            "visibility_variable": self.visibility_variable,
            "devices": [d.to_dict() for d in self.devices],
        }


@dataclass
class Inventory:
    families: list[FamilyStatus]
    system: SystemScan
    physical: list[PhysicalDevice]
    visibility: dict[str, str]
    warnings: list[str]

    @property
    def torch_devices(self) -> list[DeviceInfo]:
        return [d for f in self.families for d in f.devices]

    def to_dict(self) -> dict[str, Any]:
        return {
            "torch": [f.to_dict() for f in self.families],
            "system": {
                "root": self.system.root,
                "device_nodes": self.system.device_nodes,
                "notes": self.system.notes,
                "devices": [p.to_dict() for p in self.physical],
            },
            "visibility": self.visibility,
            "warnings": self.warnings,
        }


def family_statuses() -> list[FamilyStatus]:
    statuses = []
    for backend in all_backends():
        usable, reason = backend.availability()
        devices = backend.devices() if usable else []
        statuses.append(FamilyStatus(backend.family, usable, reason, backend.visibility_variable, devices))
    return statuses


def take_inventory(system_root: Path | str = "/") -> Inventory:
    families = family_statuses()
    torch_devices = [d for f in families for d in f.devices]
    scan = scan_system(system_root)
    physical = reconcile(scan, torch_devices)
    visibility = {v: os.environ[v] for v in visibility_variables() if v in os.environ}
    warnings = order_warnings(torch_devices) + scan.notes
    hidden = [p for p in physical if p.reason.startswith("hidden by")]
    warnings += [f"{p.pci.address} ({p.pci.vendor}) is {p.reason}" for p in hidden]
    return Inventory(families, scan, physical, visibility, warnings)
