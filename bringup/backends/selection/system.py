"""What the OS has, independent of torch: PCI display/accelerator devices and driver device nodes.

Reads below a root path (default "/") so tests can point it at a fixture tree. The vendors and driver nodes of
the families bringup drives come from the registered backends (their `hardware`); the tables here name only
what no backend drives.
"""

import glob
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bringup.backends.base import Backend
from bringup.backends.registry import registered

# vendors of display and accelerator devices no backend drives (so the scan can still name them)
OTHER_PCI_VENDORS = {
    "0x1022": "AMD",
    "0x1d0f": "Amazon",
    "0x1e52": "Tenstorrent",
    "0x1ae0": "Google",
    "0x1234": "QEMU",
    "0x1af4": "Red Hat (virtio)",
    "0x15ad": "VMware",
    "0x1a03": "ASPEED",
    "0x102b": "Matrox",
}

CLASS_NAMES = {
    "0300": "VGA compatible controller",
    "0301": "XGA controller",
    "0302": "3D controller",
    "0380": "display controller",
    "1200": "processing accelerator",
    "1201": "AI inference accelerator",
}

# the kernel's generic compute-accelerator nodes, which no one vendor owns
OTHER_DEVICE_NODES = {"accel": ("dev/accel/accel*",)}


@dataclass
class PciDevice:
    address: str
    vendor_id: str
    device_id: str
    vendor: str
    class_code: str
    kind: str
    driver: str | None
    numa_node: int | None = None
    boot_vga: bool | None = None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class SystemScan:
    root: str
    pci: list[PciDevice] = field(default_factory=list)
    device_nodes: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "root": self.root,
            "pci": [d.to_dict() for d in self.pci],
            "device_nodes": self.device_nodes,
            "notes": self.notes,
        }


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError:
        return None


def is_display_or_accelerator(class_code: str) -> bool:
    return class_code[:2] in ("03", "12")


def pci_vendors(backends: list[Backend]) -> dict[str, str]:
    """PCI vendor id -> name: the backends' vendors, then the others."""
    declared = {vid: name for b in backends for hw in b.hardware for vid, name in hw.pci_vendors.items()}
    return declared | {vid: name for vid, name in OTHER_PCI_VENDORS.items() if vid not in declared}


def device_node_patterns(backends: list[Backend]) -> dict[str, tuple[str, ...]]:
    """Node group -> globs below the root, in the backends' order, then the generic ones."""
    groups = {hw.node_group: hw.node_patterns for b in backends for hw in b.hardware if hw.node_group}
    return groups | OTHER_DEVICE_NODES


def read_pci_device(entry: Path, vendors: dict[str, str]) -> PciDevice | None:
    raw_class = _read(entry / "class")
    if raw_class is None:
        return None
    class_hex = raw_class.lower().removeprefix("0x").rjust(6, "0")
    if not is_display_or_accelerator(class_hex):
        return None
    vendor_id = (_read(entry / "vendor") or "?").lower()
    driver_link = entry / "driver"
    driver = os.path.basename(os.readlink(driver_link)) if driver_link.is_symlink() else None
    numa = _read(entry / "numa_node")
    boot_vga = _read(entry / "boot_vga")
    return PciDevice(
        address=entry.name,
        vendor_id=vendor_id,
        device_id=(_read(entry / "device") or "?").lower(),
        vendor=vendors.get(vendor_id, f"unknown vendor {vendor_id}"),
        class_code=f"0x{class_hex}",
        kind=CLASS_NAMES.get(class_hex[:4], "display" if class_hex.startswith("03") else "accelerator"),
        driver=driver,
        numa_node=int(numa) if numa and numa.lstrip("-").isdigit() and int(numa) >= 0 else None,
        boot_vga=(boot_vga == "1") if boot_vga is not None else None,
    )


def scan_pci(root: Path, vendors: dict[str, str]) -> tuple[list[PciDevice], list[str]]:
    base = root / "sys" / "bus" / "pci" / "devices"
    if not base.is_dir():
        return [], [f"{base} is absent: PCI devices cannot be listed on this OS"]
    found = [d for d in (read_pci_device(e, vendors) for e in sorted(base.iterdir())) if d is not None]
    return found, []


def scan_device_nodes(root: Path, patterns_by_group: dict[str, tuple[str, ...]]) -> dict[str, list[str]]:
    nodes: dict[str, list[str]] = {}
    for group, patterns in patterns_by_group.items():
        hits = sorted({"/" + os.path.relpath(p, root) for pat in patterns for p in glob.glob(str(root / pat))})
        if hits:
            nodes[group] = hits
    return nodes


def scan_system(root: Path | str = "/", backends: list[Backend] | None = None) -> SystemScan:
    """The OS's devices below `root`, matched against the hardware the backends (default: all registered) drive."""
    backends = registered() if backends is None else backends
    root_path = Path(root)
    pci, notes = scan_pci(root_path, pci_vendors(backends))
    nodes = scan_device_nodes(root_path, device_node_patterns(backends))
    return SystemScan(root=str(root_path), pci=pci, device_nodes=nodes, notes=notes)
