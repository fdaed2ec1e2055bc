"""The devices the default spec describes, as torch.emu, torch.accelerator and tensors see them."""

import pytest

from bringup_emu.default_spec import DEFAULT_SPEC
from bringup_emu.op_names import OWN_KERNELS
from bringup_emu.spec import parse_size
from tests.emulator.emu_process import emu_results

BODY = """
props = [torch.emu.get_device_properties(i) for i in range(torch.emu.device_count())]
x = torch.arange(6).reshape(2, 3)
report(
    available=torch.emu.is_available(),
    count=torch.emu.device_count(),
    names=[p.name for p in props],
    integrated=[p.is_integrated for p in props],
    total=[p.total_memory for p in props],
    mem_info=[list(torch.emu.mem_get_info(i)) for i in range(torch.emu.device_count())],
    device_name_1=torch.emu.get_device_name(1),
    accelerator=str(torch.accelerator.current_accelerator()),
    accelerator_count=torch.accelerator.device_count(),
    backend_name=torch._C._get_privateuse1_backend_name(),
    method_device=str(x.emu().device),
    is_emu=x.emu().is_emu,
    cpu_is_emu=x.is_emu,
    on_1=str(x.to("emu:1").device),
    back=x.to("emu:1").cpu().tolist(),
    own=sorted(bringup_emu.runtime.extension().own_kernels()),
    current_after_set=(torch.emu.set_device(1), torch.emu.current_device())[1],
    accelerator_current=torch.accelerator.current_device_index(),
    capability=sorted(str(d) for d in torch.accelerator.get_device_capability(0)["supported_dtypes"]),
    stats_keys=sorted(torch.emu.memory_stats(0)),
)
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY)


def test_device_count_names_and_kinds_come_from_the_spec(seen: dict) -> None:
    devices = DEFAULT_SPEC["devices"]
    assert seen["available"] is True
    assert seen["count"] == len(devices) == seen["accelerator_count"]
    assert seen["names"] == [d["name"] for d in devices]
    assert seen["device_name_1"] == devices[1]["name"]
    assert seen["integrated"] == [d["integrated"] for d in devices]
    assert seen["total"] == [parse_size(d["memory"], "memory") for d in devices]
    assert [info[1] for info in seen["mem_info"]] == seen["total"]


def test_the_accelerator_is_emu_and_tensors_know_it(seen: dict) -> None:
    assert seen["accelerator"] == "emu"
    assert seen["backend_name"] == "emu"
    assert seen["method_device"] == "emu:0"
    assert seen["is_emu"] is True and seen["cpu_is_emu"] is False
    assert seen["on_1"] == "emu:1"
    assert seen["back"] == [[0, 1, 2], [3, 4, 5]]


def test_set_device_moves_the_current_device(seen: dict) -> None:
    assert seen["current_after_set"] == 1
    assert seen["accelerator_current"] == 1


def test_the_python_list_of_own_kernels_matches_the_extension(seen: dict) -> None:
    assert set(seen["own"]) == OWN_KERNELS


def test_the_capability_leaves_out_the_refused_dtypes(seen: dict) -> None:
    assert "torch.float32" in seen["capability"] and "torch.bfloat16" in seen["capability"]
    assert "torch.float64" not in seen["capability"]


def test_memory_stats_have_the_cuda_keys(seen: dict) -> None:
    assert {"allocated_bytes.all.current", "allocated_bytes.all.peak", "allocation.all.current"} <= set(
        seen["stats_keys"])
