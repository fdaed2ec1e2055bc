"""The spec's faults: refused dtypes, ops that compute wrong numbers, ops that abort the process."""

import signal

import pytest

from tests.emulator.emu_process import emu_results, run_emu

SPEC = {
    "devices": [{"name": "faulty", "memory": "64MiB"}],
    "refused_dtypes": ["float64", "bfloat16"],
    "native": ["mul"],
    "wrong": {"mul": 2.0, "sub.out": 0.5},
    "abort": ["sigmoid"],
}

BODY = """
def refusal(make):
    try:
        make()
    except TypeError as error:
        return str(error)
    return None

a, b = torch.arange(1.0, 7.0).reshape(2, 3), torch.full((2, 3), 3.0)
ea, eb = a.to("emu"), b.to("emu")
report(
    alloc_float64=refusal(lambda: torch.zeros(3, dtype=torch.float64, device="emu")),
    copy_bfloat16=refusal(lambda: torch.ones(3, dtype=torch.bfloat16).to("emu")),
    cast_on_device=refusal(lambda: ea.to(torch.float64)),
    float32_fine=refusal(lambda: torch.ones(3).to("emu")),
    mul=(ea * eb).cpu().tolist(), mul_cpu=(a * b).tolist(),
    sub=(ea - eb).cpu().tolist(), sub_cpu=(a - b).tolist(),
    int_mul=(ea.long() * 3).cpu().tolist(), int_mul_cpu=(a.long() * 3).tolist(),
    add=(ea + eb).cpu().tolist(), add_cpu=(a + b).tolist(),
)
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY, SPEC)


@pytest.mark.parametrize("case", ["alloc_float64", "copy_bfloat16", "cast_on_device"])
def test_a_refused_dtype_raises_the_clear_error(seen: dict, case: str) -> None:
    dtype = "bfloat16" if case == "copy_bfloat16" else "float64"
    assert seen[case] == f"emu: {dtype} is not supported on emu devices (refused_dtypes in the spec)"


def test_other_dtypes_are_accepted(seen: dict) -> None:
    assert seen["float32_fine"] is None


def test_a_wrong_op_scales_its_floating_outputs_native_or_fallback(seen: dict) -> None:
    assert seen["mul"] == [[2 * v for v in row] for row in seen["mul_cpu"]]  # native
    assert seen["sub"] == [[0.5 * v for v in row] for row in seen["sub_cpu"]]  # fallback


def test_integer_outputs_and_other_ops_stay_exact(seen: dict) -> None:
    assert seen["int_mul"] == seen["int_mul_cpu"]
    assert seen["add"] == seen["add_cpu"]


def test_an_abort_op_kills_the_process_and_only_that_op() -> None:
    done = run_emu("print('before', (torch.ones(2, device='emu') + 1).cpu().tolist(), flush=True)\n"
                   "torch.ones(2, device='emu').sigmoid()\nprint('after')", SPEC)
    assert done.returncode == -signal.SIGABRT
    assert "before [2.0, 2.0]" in done.stdout and "after" not in done.stdout
    assert "emu: aten::sigmoid.out is listed under abort in the spec" in done.stderr
