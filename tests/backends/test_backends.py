import torch

from bringup.backends.ascend import AscendBackend
from bringup.backends.cpu import CpuBackend
from bringup.backends.cuda import CudaBackend
from bringup.backends.habana import HabanaBackend
from bringup.backends.mps import MpsBackend
from bringup.backends.privateuse1 import PrivateUse1Backend
from bringup.backends.registry import all_backends, backend_for, device_info, synchronize
from bringup.backends.xpu import XpuBackend


def test_cpu_identity_is_complete_and_queries_are_idempotent():
    backend = CpuBackend()
    first, second = backend.device_info(0), backend.device_info(0)
    assert first.id == "cpu" and first.backend == "cpu" and first.name
    assert first.extra["isa_level"] == str(torch.backends.cpu.get_cpu_capability())
    assert first.extra["logical_cores"] >= 1 and first.memory_total_bytes > 0
    volatile = {"memory_free_bytes"}
    assert {k: v for k, v in first.to_dict().items() if k not in volatile} == {
        k: v for k, v in second.to_dict().items() if k not in volatile
    }
    assert torch.get_num_threads() == first.extra["torch_threads"]


def test_absent_families_report_unavailable_without_raising():
    for backend in (CudaBackend(), XpuBackend(), MpsBackend(), AscendBackend(), HabanaBackend(),
                    PrivateUse1Backend("npu")):
        usable, reason = backend.availability()
        if usable:
            continue
        assert reason, backend.family
        assert backend.devices() == [] and backend.device_count() == 0
    npu = AscendBackend()
    assert npu.visibility_variable == "ASCEND_RT_VISIBLE_DEVICES" and npu.vendor_default == "Huawei"
    assert not npu.availability()[0] and "torch.npu is missing" in npu.availability()[1]


def test_cuda_backend_names_the_build_when_absent():
    backend = CudaBackend()
    if torch.version.cuda is None and getattr(torch.version, "hip", None) is None:
        assert "neither CUDA nor ROCm" in backend.availability()[1]
        assert backend.visibility_variable == "CUDA_VISIBLE_DEVICES" and backend.family_of_device() == "cuda"


def test_registry_lookups_and_sync():
    assert backend_for("cpu").family == "cpu"
    assert device_info("cpu").id == "cpu"
    synchronize("cpu")
    assert all_backends()[-1].family == "cpu"
