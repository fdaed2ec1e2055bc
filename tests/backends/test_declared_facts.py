"""The OS scan, reconcile, visibility variables and environment facts read what backends declare: a new family
declared in one class (here one this torch build does not have) is scanned, reconciled and reported."""

import pytest
import torch

from bringup.backends.base import Hardware, SmiTool
from bringup.backends.module_backend import ModuleBackend
from bringup.backends.registry import registered
from bringup.backends.selection.reconcile import build_support, reconcile, visibility_variables
from bringup.backends.selection.system import scan_system
from bringup.errors import StrictFallbackError
from bringup.fallbacks import FallbackRecorder
from bringup.probes.env_facts.accelerators import accelerator_facts
from bringup.runner.model.attention import AttentionDispatcher
from tests.backends.sysfs import add_nodes, add_pci


class AcmeBackend(ModuleBackend):
    """A family this torch build lacks (there is no torch.acme), declared as a vendor package would."""

    family = "acme"
    torch_device_type = "acme"
    module_name = "acme"
    visibility_variable = "ACME_VISIBLE_DEVICES"
    hardware = (Hardware("acme", {"0x1e52": "Acme Silicon"}, "acme", ("dev/acme[0-9]*",), "ACME_VISIBLE_DEVICES"),)
    visibility_variables = ("ACME_VISIBLE_DEVICES",)
    order_variables = ("ACME_DEVICE_ORDER",)
    smi_tools = (SmiTool("acme-smi-not-installed", ("list",), r"."),)
    driver_files = {"opt/acme/version": "acme"}
    kernel_modules = ("acme_drv",)

    def present(self) -> bool:
        return self.module() is not None

    def build_support(self) -> dict[str, tuple[bool, str]]:
        return {"acme": (self.module() is not None, "the torch_acme extension is not installed")}


def test_a_declared_vendor_is_named_and_reconciled(tmp_path):
    add_pci(tmp_path, "0000:41:00.0", "0x1e52", "0x401e", "0x120000", "acme_drv")
    backends = [*registered(), AcmeBackend()]
    scan = scan_system(tmp_path, backends)
    assert scan.pci[0].vendor == "Acme Silicon" and scan.device_nodes == {}
    (device,) = reconcile(scan, [], env={}, backends=backends)
    assert device.family == "acme" and not device.usable
    assert device.reason == "the torch_acme extension is not installed"
    built = {**build_support(backends), "acme": (True, "")}
    (device,) = reconcile(scan, [], support=built, env={}, backends=backends)
    assert device.reason == "no driver device node (acme nodes under /dev are missing)"
    add_nodes(tmp_path, "acme0")
    scan = scan_system(tmp_path, backends)
    assert scan.device_nodes == {"acme": ["/dev/acme0"]}
    (device,) = reconcile(scan, [], support=built, env={"ACME_VISIBLE_DEVICES": ""}, backends=backends)
    assert device.reason == "hidden by ACME_VISIBLE_DEVICES=''"


def test_without_its_backend_the_vendor_is_unknown(tmp_path):
    add_pci(tmp_path, "0000:41:00.0", "0x1e52", "0x401e", "0x120000", "acme_drv")
    (device,) = reconcile(scan_system(tmp_path), [], env={})
    assert device.family is None and device.pci.vendor == "Tenstorrent"  # only a name, from system.py's table


def test_visibility_variables_are_one_list_gathered_from_the_backends():
    assert visibility_variables() == (
        "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ZE_AFFINITY_MASK",
        "ASCEND_RT_VISIBLE_DEVICES", "HABANA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    )
    with_acme = visibility_variables([*registered(), AcmeBackend()])
    assert with_acme[-3:] == ("ACME_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "ACME_DEVICE_ORDER")


def test_environment_facts_read_the_declared_tools_files_and_modules(tmp_path):
    (tmp_path / "opt" / "acme").mkdir(parents=True)
    (tmp_path / "opt" / "acme" / "version").write_text("\nacme driver 7.1.2\n")
    (tmp_path / "sys" / "module" / "acme_drv").mkdir(parents=True)
    facts = accelerator_facts(tmp_path, timeout=5, backends=[AcmeBackend()])
    assert facts["driver_acme"] == "acme driver 7.1.2" and facts["kernel_modules"] == "acme_drv"
    assert "not found" in facts["acme-smi-not-installed"]
    assert "nvidia-smi" not in facts  # the built-in families' tools are theirs, not the report's


def test_an_implementation_no_backend_supplies_falls_back_visibly():
    """A profile may name a plugin's attention (verified where the plugin was installed) on a machine without
    it: the dispatcher records an op fallback to the next planned implementation, and --strict refuses."""
    q, k, v = torch.randn(2, 1, 3, 8), torch.randn(2, 1, 5, 8), torch.randn(2, 1, 5, 8)
    recorder = FallbackRecorder()
    attend = AttentionDispatcher(["vendor_attention_not_installed", "matmul_softmax"], recorder)
    out = attend(q, k, v, None, 8 ** -0.5)
    assert out.shape == (2, 1, 3, 8) and attend.current == "matmul_softmax"
    (event,) = recorder.events
    assert event.wanted == "vendor_attention_not_installed" and "no registered backend supplies" in event.why
    strict = AttentionDispatcher(["vendor_attention_not_installed", "matmul_softmax"], FallbackRecorder(strict=True))
    with pytest.raises(StrictFallbackError, match="vendor_attention_not_installed"):
        strict(q, k, v, None, 8 ** -0.5)
