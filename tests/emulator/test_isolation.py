"""The pytest process itself never has the emu device: the other tests keep a CPU-only torch."""

import os

import pytest
import torch


@pytest.mark.skipif("BRINGUP_EMU_SPEC" in os.environ, reason="BRINGUP_EMU_SPEC is set for this pytest run")
def test_the_test_process_has_no_emu_device() -> None:
    import bringup_emu

    assert torch._C._get_privateuse1_backend_name() == "privateuseone"
    assert not hasattr(torch, "emu")
    assert not bringup_emu.is_active()
