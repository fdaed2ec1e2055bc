import torch

from bringup.backends.base import DeviceInfo
from bringup.backends.registry import all_backends
from bringup.backends.selection.reconcile import build_support, order_warnings, reconcile
from bringup.backends.selection.system import scan_system
from tests.backends.sysfs import add_nodes, add_pci, amd_accelerator, intel_igpu_nvidia_dgpu, no_display

CPU_ONLY_TORCH = torch.version.cuda is None and getattr(torch.version, "hip", None) is None


def real_torch_devices() -> list[DeviceInfo]:
    return [d for b in all_backends() for d in b.devices()]


def test_igpu_and_dgpu_with_cpu_only_torch(tmp_path):
    scan = scan_system(intel_igpu_nvidia_dgpu(tmp_path))
    assert [d.address for d in scan.pci] == ["0000:00:02.0", "0000:01:00.0"]
    assert scan.device_nodes["nvidia"] == ["/dev/nvidia0", "/dev/nvidiactl"]
    physical = {p.pci.address: p for p in reconcile(scan, real_torch_devices(), env={})}
    igpu, dgpu = physical["0000:00:02.0"], physical["0000:01:00.0"]
    assert igpu.pci.vendor == "Intel" and igpu.integrated is True and igpu.family == "xpu"
    assert dgpu.pci.vendor == "NVIDIA" and dgpu.pci.kind == "3D controller" and dgpu.integrated is None
    if CPU_ONLY_TORCH:
        assert not dgpu.usable
        assert "has no CUDA support" in dgpu.reason and torch.__version__ in dgpu.reason
        assert not igpu.usable and "XPU" in igpu.reason


def test_amd_accelerator_is_listed_with_rocm_reason(tmp_path):
    scan = scan_system(amd_accelerator(tmp_path))
    (device,) = reconcile(scan, real_torch_devices(), env={})
    assert device.pci.vendor == "AMD" and device.pci.kind == "processing accelerator"
    assert device.family == "rocm"
    if CPU_ONLY_TORCH:
        assert not device.usable and "no ROCm support" in device.reason


def test_machine_without_display_devices(tmp_path):
    scan = scan_system(no_display(tmp_path))
    assert scan.pci == [] and scan.device_nodes == {}
    assert reconcile(scan, real_torch_devices(), env={}) == []


def test_missing_sysfs_is_a_note_not_a_crash(tmp_path):
    scan = scan_system(tmp_path)
    assert scan.pci == [] and "absent" in scan.notes[0]


SUPPORTED_BUILD = {"cuda": (True, ""), "rocm": (True, ""), "xpu": (True, ""), "npu": (True, "")}


def test_reasons_when_the_build_has_the_backend(tmp_path):
    add_pci(tmp_path, "0000:01:00.0", "0x10de", "0x2330", "0x030200", None)
    add_pci(tmp_path, "0000:02:00.0", "0x10de", "0x2330", "0x030200", "nvidia")
    add_pci(tmp_path, "0000:03:00.0", "0x19e5", "0xd802", "0x120000", "devdrv_device_driver")
    scan = scan_system(tmp_path)
    reasons = {p.pci.address: p.reason for p in reconcile(scan, [], support=SUPPORTED_BUILD, env={})}
    assert reasons["0000:01:00.0"] == "no kernel driver is bound to it"
    assert reasons["0000:02:00.0"].startswith("no driver device node (nvidia")
    assert reasons["0000:03:00.0"].startswith("no driver device node (ascend")
    add_nodes(tmp_path, "nvidia0")
    scan = scan_system(tmp_path)
    hidden = reconcile(scan, [], support=SUPPORTED_BUILD, env={"CUDA_VISIBLE_DEVICES": "1"})
    assert hidden[1].reason == "hidden by CUDA_VISIBLE_DEVICES='1'"


def test_torch_device_matched_by_pci_bus_id(tmp_path):
    add_pci(tmp_path, "0000:3b:00.0", "0x10de", "0x2330", "0x030200", "nvidia")
    gpu = DeviceInfo(id="cuda:0", backend="cuda", name="H100", pci_bus_id="0000:3b:00.0", integrated=False)
    (p,) = reconcile(scan_system(tmp_path), [gpu], support=SUPPORTED_BUILD, env={})
    assert p.usable and p.torch_id == "cuda:0" and p.integrated is False


def test_enumeration_order_warning():
    a = DeviceInfo(id="cuda:0", backend="cuda", name="fast", pci_bus_id="0000:81:00.0")
    b = DeviceInfo(id="cuda:1", backend="cuda", name="slow", pci_bus_id="0000:01:00.0")
    (warning,) = order_warnings([a, b], env={})
    assert "differs" in warning and "cuda:0=0000:81:00.0" in warning
    assert order_warnings([a, b], env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}) == []
    assert order_warnings([a], env={}) == []


def test_build_support_reports_this_torch():
    support = build_support()
    assert support["cuda"][0] == (torch.version.cuda is not None)
    assert set(support) >= {"cuda", "rocm", "xpu", "npu", "mps"}
