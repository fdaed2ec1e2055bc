"""A device type with no index (`--device xpu`) chooses among that type's devices by the automatic rule (discrete
first, torch's order breaking ties) and says so; an index still means that device. The automatic reason names the
accelerators it passed over and why. Families here are fakes on a device type torch parses, so nothing depends on
the machine."""

import pytest

from bringup.backends.base import Backend, DeviceInfo
from bringup.backends.cpu import CpuBackend
from bringup.backends.selection import select


class TwoDeviceFamily(Backend):
    """A family whose devices are given, on torch's `xpu` device type."""

    family = "xpu"
    torch_device_type = "xpu"

    def __init__(self, devices: list[DeviceInfo]) -> None:
        self.listed = devices

    def availability(self) -> tuple[bool, str]:
        return True, ""

    def device_count(self) -> int:
        return len(self.listed)

    def device_info(self, index: int) -> DeviceInfo:
        return self.listed[index]

    def memory(self, index: int) -> tuple[int | None, int | None]:
        return None, None

    def synchronize(self, device) -> None:
        return None


def device(index: int, name: str, integrated: bool | None) -> DeviceInfo:
    return DeviceInfo(id=f"xpu:{index}", backend="xpu", name=name, integrated=integrated)


@pytest.fixture
def family(monkeypatch):
    """Installs a fake xpu family with the devices a test gives it, beside the host."""

    def install(*devices: DeviceInfo) -> None:
        fake, host = TwoDeviceFamily(list(devices)), CpuBackend()
        monkeypatch.setattr(select, "all_backends", lambda: [fake, host])
        monkeypatch.setattr(select, "backend_for", lambda kind: fake if kind == "xpu" else host)

    monkeypatch.delenv(select.ENV_VAR, raising=False)
    return install


def test_a_bare_type_takes_its_discrete_device_and_says_why(family):
    family(device(0, "iGPU", True), device(1, "dGPU", False))
    chosen = select.select_device("xpu")
    assert chosen.info.id == "xpu:1" and chosen.source == "flag"
    assert chosen.reason.startswith("--device xpu (no index: of the 2 xpu devices the automatic rule prefers xpu:1")
    assert "discrete; xpu:0 (iGPU) is integrated" in chosen.reason


def test_an_index_still_means_that_device(family):
    family(device(0, "iGPU", True), device(1, "dGPU", False))
    chosen = select.select_device("xpu:0")
    assert chosen.info.id == "xpu:0" and chosen.reason == "--device xpu:0"


def test_a_bare_type_in_the_environment_variable_follows_the_same_rule(family, monkeypatch):
    family(device(0, "iGPU", True), device(1, "dGPU", False))
    monkeypatch.setenv(select.ENV_VAR, "xpu")
    chosen = select.select_device(None)
    assert chosen.info.id == "xpu:1" and chosen.reason.startswith("BRINGUP_DEVICE=xpu (no index:")


def test_equal_discrete_devices_keep_torchs_order(family):
    """Two discrete cards (the usual multi-GPU server): a bare type is the first, as torch's default device is."""
    family(device(0, "card A", False), device(1, "card B", False))
    chosen = select.select_device("xpu")
    assert chosen.info.id == "xpu:0"
    assert "discrete, the first of its kind in torch's enumeration order; xpu:1 (card B) is discrete" in chosen.reason


def test_a_single_device_type_needs_no_rule(family):
    family(device(0, "dGPU", False))
    chosen = select.select_device("xpu")
    assert chosen.info.id == "xpu:0" and chosen.reason == "--device xpu"


def test_the_automatic_reason_names_what_it_passed_over(family):
    family(device(0, "iGPU", True), device(1, "card", None))
    chosen = select.select_device(None)
    assert chosen.source == "auto" and chosen.info.id == "xpu:1"
    assert chosen.reason == "of unknown kind (ranked as discrete); xpu:0 (iGPU) is integrated"


def test_an_integrated_device_is_chosen_only_without_a_discrete_one(family):
    family(device(0, "iGPU", True))
    chosen = select.select_device(None)
    assert chosen.info.id == "xpu:0" and chosen.reason == "integrated (no discrete accelerator is usable)"
