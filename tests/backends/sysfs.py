"""Build fixture OS trees (sysfs PCI entries and /dev nodes) for the OS-scan tests."""

import os
from pathlib import Path


def add_pci(root: Path, address: str, vendor: str, device: str, class_code: str, driver: str | None) -> None:
    entry = root / "sys" / "bus" / "pci" / "devices" / address
    entry.mkdir(parents=True)
    (entry / "vendor").write_text(vendor + "\n")
    (entry / "device").write_text(device + "\n")
    (entry / "class").write_text(class_code + "\n")
    (entry / "numa_node").write_text("-1\n")
    if driver:
        target = root / "sys" / "bus" / "pci" / "drivers" / driver
        target.mkdir(parents=True, exist_ok=True)
        os.symlink(target, entry / "driver")


def add_nodes(root: Path, *names: str) -> None:
    for name in names:
        node = root / "dev" / name
        node.parent.mkdir(parents=True, exist_ok=True)
        node.write_text("")


def intel_igpu_nvidia_dgpu(root: Path) -> Path:
    add_pci(root, "0000:00:00.0", "0x8086", "0x9b33", "0x060000", None)  # host bridge: not listed
    add_pci(root, "0000:00:02.0", "0x8086", "0x9bc4", "0x030000", "i915")
    add_pci(root, "0000:01:00.0", "0x10de", "0x2520", "0x030200", "nvidia")
    add_nodes(root, "nvidia0", "nvidiactl", "dri/renderD128")
    return root


def amd_accelerator(root: Path) -> Path:
    add_pci(root, "0000:c1:00.0", "0x1002", "0x74a1", "0x120000", "amdgpu")
    add_nodes(root, "kfd", "dri/renderD128")
    return root


def no_display(root: Path) -> Path:
    add_pci(root, "0000:00:00.0", "0x8086", "0x1237", "0x060000", None)
    add_pci(root, "0000:00:03.0", "0x1af4", "0x1000", "0x020000", "virtio-pci")
    return root
