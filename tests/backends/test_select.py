import logging

import pytest
import torch

from bringup.backends.base import DeviceInfo
from bringup.backends.selection.select import choose_automatically, select_device
from bringup.errors import BringupError


def test_flag_beats_env_and_profile(monkeypatch):
    monkeypatch.setenv("BRINGUP_DEVICE", "no-such-device")
    selection = select_device("cpu", profile_device="also-not-a-device")
    assert selection.source == "flag" and selection.device == torch.device("cpu")


def test_env_beats_profile(monkeypatch):
    monkeypatch.setenv("BRINGUP_DEVICE", "cpu")
    selection = select_device(None, profile_device="also-not-a-device")
    assert selection.source == "env" and "BRINGUP_DEVICE=cpu" in selection.reason


def test_profile_beats_automatic(monkeypatch):
    monkeypatch.delenv("BRINGUP_DEVICE", raising=False)
    selection = select_device(None, profile_device="cpu")
    assert selection.source == "profile"


def test_automatic_cpu_choice_is_a_warning(monkeypatch, caplog):
    monkeypatch.delenv("BRINGUP_DEVICE", raising=False)
    if torch.cuda.is_available():
        pytest.skip("this machine has an accelerator, so automatic selection does not pick the CPU")
    logging.getLogger("bringup").propagate = True
    with caplog.at_level(logging.INFO, logger="bringup"):
        selection = select_device(None)
    assert selection.source == "auto" and selection.info.id == "cpu"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no accelerator is usable" in r.getMessage() for r in warnings)


def test_unknown_device_string():
    with pytest.raises(BringupError, match="not a device torch knows"):
        select_device("gpu0")


def test_index_out_of_range_lists_usable_devices():
    with pytest.raises(BringupError, match=r"index 3 is out of range.*usable here: cpu"):
        select_device("cpu:3")


def test_unavailable_family_explains_why():
    if torch.cuda.is_available():
        pytest.skip("CUDA is usable here")
    with pytest.raises(BringupError, match=r"not usable: .*usable here: cpu"):
        select_device("cuda:0")


def test_automatic_prefers_discrete_over_integrated_over_cpu():
    cpu = DeviceInfo(id="cpu", backend="cpu", name="host")
    igpu = DeviceInfo(id="xpu:0", backend="xpu", name="iGPU", integrated=True)
    dgpu = DeviceInfo(id="xpu:1", backend="xpu", name="dGPU", integrated=False)
    assert choose_automatically([cpu, igpu, dgpu])[0] is dgpu
    assert choose_automatically([cpu, igpu])[0] is igpu
    assert choose_automatically([cpu])[0] is cpu


def test_the_emulator_without_its_spec_says_to_set_it():
    if hasattr(torch, "emu"):
        pytest.skip("the emulated device is active in this process")
    for text in ("emu", "emu:1"):
        with pytest.raises(BringupError, match=r"--device .* is not usable: .*set BRINGUP_EMU_SPEC") as caught:
            select_device(text)
        assert "\n" not in str(caught.value)
