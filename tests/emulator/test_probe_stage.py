"""`bringup probe` on the emulated device, with a spec that refuses bfloat16: the refused dtype is `unsupported`
quoting the device's own error, memory equals the spec's caps (through torch.emu, and through torch.accelerator
where the module has no mem_get_info), each SDPA backend is judged by the kernel that really ran, and inductor,
which has no code generator for the device, is `unsupported` with that reason, its eager path a logged, counted
fallback."""

import json

import pytest
import yaml

from tests.emulator.emu_cli import run_bringup
from tests.emulator.emu_process import emu_results

MiB = 1 << 20
SPEC = {
    "devices": [{"name": "Emu iGPU", "integrated": True, "memory": "256MiB"}, {"name": "Emu dGPU", "memory": "1GiB"}],
    "refused_dtypes": ["bfloat16"],
    "native": ["mm", "add", "mul", "_softmax", "bmm"],
}
CAPS = [256 * MiB, 1024 * MiB]
CHECKS = ("dtypes.bfloat16,dtypes.float32,memory.total,memory.free,attention.sdpa_math,attention.sdpa_efficient,"
          "compile.inductor,features.graphs")
REFUSED = "TypeError: emu: bfloat16 is not supported on emu devices (refused_dtypes in the spec)"
MATH = "aten::_scaled_dot_product_attention_math"


@pytest.fixture(scope="module")
def probed(tmp_path_factory) -> tuple[dict, dict, str]:
    """(the --json document, the profile written, stderr) of one probe run on a bare `--device emu`."""
    folder = tmp_path_factory.mktemp("probe")
    profile = folder / "emu.yaml"
    done = run_bringup(["probe", "--device", "emu", "--only", CHECKS, "--json", "--profile", str(profile)], SPEC,
                       folder)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), yaml.safe_load(profile.read_text()), done.stderr


def test_the_probe_ran_on_the_discrete_device(probed):
    document, profile, _ = probed
    assert document["device"] == "emu:1"
    assert profile["device"]["backend"] == "emu" and profile["device"]["integrated"] is False


def test_a_refused_dtype_is_unsupported_quoting_the_devices_error(probed):
    checks = probed[0]["capabilities"]
    assert checks["dtypes.bfloat16"]["status"] == "unsupported"
    assert REFUSED in checks["dtypes.bfloat16"]["reason"]
    assert checks["dtypes.float32"]["status"] == "supported"


def test_memory_equals_the_spec_cap(probed):
    checks = probed[0]["capabilities"]
    for name in ("memory.total", "memory.free"):  # nothing is allocated in the worker when these run
        assert checks[name]["status"] == "supported"
        assert checks[name]["details"] == {"bytes": CAPS[1], "source": "torch.emu.mem_get_info"}


def test_each_sdpa_backend_is_judged_by_the_kernel_that_ran(probed):
    checks = probed[0]["capabilities"]
    math = checks["attention.sdpa_math"]
    assert math["status"] == "supported" and math["details"]["kernels"] == [MATH]
    assert REFUSED in math["details"]["dtypes"]["bfloat16"]
    efficient = checks["attention.sdpa_efficient"]  # torch runs math for it on a PrivateUse1 device: not efficient
    assert efficient["status"] == "unsupported"
    assert f"torch ran {MATH} instead of aten::_scaled_dot_product_efficient_attention" in efficient["reason"]


def test_inductor_is_unsupported_with_the_reason_and_eager_is_a_counted_fallback(probed):
    document, profile, stderr = probed
    inductor = document["capabilities"]["compile.inductor"]
    assert inductor["status"] == "unsupported"
    assert inductor["reason"].startswith("inductor has no code generator for emu devices")
    assert "torch.compile(backend='inductor') failed" in inductor["reason"]
    fallback = inductor["details"]["fallback"]
    assert fallback["instead"] == "eager" and fallback["eager"].startswith("eager max_rel")
    assert document["fallbacks"]["counts"] == {"op": 0, "path": 1, "global": 0}
    (event,) = document["fallbacks"]["events"]
    assert event["what"] == "compile.inductor: matmul+silu+rms sample" and event["why"] == inductor["reason"]
    assert "WARNING  fallback[path] compile.inductor: matmul+silu+rms sample: wanted torch.compile(backend=" \
           "'inductor'), using eager because inductor has no code generator for emu devices" in stderr
    assert profile["capabilities"]["compile"]["inductor"]["details"]["fallback"] == fallback


def test_the_emu_backend_declares_what_the_emulator_lacks(probed):
    declared = probed[1]["capabilities"]["not_applicable"]
    assert {"attention.sdpa_efficient", "features.pinned_memory"} <= set(declared)
    assert "features.graphs" not in declared  # the emulator has graphs (torch.accelerator.Graph): it is probed


def test_graph_capture_is_probed_and_supported(probed):
    graphs = probed[0]["capabilities"]["features.graphs"]
    assert graphs["status"] == "supported" and graphs["evidence"].startswith("captured matmul+add, replayed")


def test_memory_through_torch_accelerator_where_the_module_has_no_mem_get_info():
    seen = emu_results("""
from bringup.probes.capabilities.memory import check_free, check_total
del torch.emu.mem_get_info  # an out-of-tree module that has only torch.accelerator's memory API
torch.emu.set_device(0)
kept = torch.empty(MiB, dtype=torch.uint8, device="emu:1")
before = [torch.emu.current_device(), torch.emu.memory_allocated(1)]
total = [check_total(torch.device("emu", i))["details"] for i in range(2)]
free = [check_free(torch.device("emu", i))["details"] for i in range(2)]
report(total=total, free=free, before=before, after=[torch.emu.current_device(), torch.emu.memory_allocated(1)])
""".replace("MiB", str(MiB)), SPEC)
    via = "torch.accelerator.get_memory_info"
    assert seen["total"] == [{"bytes": cap, "source": via} for cap in CAPS]
    assert seen["free"] == [{"bytes": CAPS[0], "source": via}, {"bytes": CAPS[1] - MiB, "source": via}]
    assert seen["after"] == seen["before"] == [0, MiB]  # a query: nothing allocated, the current device kept
