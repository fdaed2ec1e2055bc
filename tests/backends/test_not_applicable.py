"""What a backend declares its family has no such thing as names real probe checks and catalog ops."""

from bringup.backends.registry import backend_classes
from bringup.probes.capabilities.registry import all_check_ids
from bringup.probes.ops.catalog import load_catalog


def test_every_declared_absence_names_a_probe_check_or_a_catalog_op():
    checks = set(all_check_ids())
    ops = {f"ops.{name}" for name in load_catalog().ops}
    for backend in backend_classes():
        unknown = set(backend.not_applicable) - checks - ops
        assert not unknown, f"{backend.__name__} declares {sorted(unknown)}, which no check or op is called"
        assert all(reason.strip() for reason in backend.not_applicable.values())


def test_the_cpu_declares_what_a_cpu_lacks():
    from bringup.backends.cpu import CpuBackend

    assert {"dtypes.float8_e4m3fn", "attention.sdpa_cudnn", "features.graphs", "features.peer_access",
            "features.pinned_memory"} <= set(CpuBackend.not_applicable)
    assert "dtypes.bfloat16" not in CpuBackend.not_applicable and "ops._weight_int4pack_mm_for_cpu" not in \
        CpuBackend.not_applicable
