"""The soak names what only repetition shows, under real faults in the CPU matmul kernel (torch.library)."""

from __future__ import annotations

import time

import numpy as np
import torch

from bringup.probes.soak import run_soak
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli

CPU = torch.device("cpu")


def numpy_mm(wrong_calls: set[int] | None = None, sleep_per_call_s: float = 0.0):  # type: ignore[no-untyped-def]
    """An aten::mm for the CPU through numpy; float32 calls numbered in `wrong_calls` come out 1 % high, and
    each float32 call sleeps `sleep_per_call_s` times its number (a device slowing down as it runs)."""
    calls = {"float32": 0}

    def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = torch.from_numpy(a.contiguous().numpy() @ b.contiguous().numpy())
        if a.dtype == torch.float32:
            calls["float32"] += 1
            time.sleep(sleep_per_call_s * calls["float32"])
            if wrong_calls and calls["float32"] in wrong_calls:
                out = out * 1.01
        return out

    return mm


def test_a_clean_soak_passes_with_every_round_counted():
    section = run_soak(CPU, [torch.float32, torch.bfloat16], seconds=0.0, n=64, min_rounds=10)
    assert section.status == "pass" and [d.rounds for d in section.dtypes] == [10, 10]
    assert all(d.wrong_rounds == [] for d in section.dtypes)
    assert not any("wrong" in f for f in section.findings)


def test_a_result_wrong_in_one_round_only_is_named_intermittent(override_cpu_kernel):
    override_cpu_kernel("mm", numpy_mm(wrong_calls={12}))  # the 4th timed call of round 2 (its checked result)
    section = run_soak(CPU, [torch.float32], seconds=0.0, n=64, min_rounds=10)
    assert section.status == "fail"
    assert section.dtypes[0].wrong_rounds == [2]
    named = "float32: intermittent wrong results in 1 of 10 rounds (rounds 2)"
    assert any(f.startswith(named) for f in section.findings)


def test_a_rate_that_falls_over_the_run_is_named_drift(override_cpu_kernel):
    override_cpu_kernel("mm", numpy_mm(sleep_per_call_s=0.0002))
    section = run_soak(CPU, [torch.float32], seconds=0.0, n=32, min_rounds=15)
    d = section.dtypes[0]
    assert section.status == "pass" and d.ratio < 0.9 and d.last_tflops < d.first_tflops
    assert any("matmul rate drifted" in f and "throttling" in f for f in section.findings)


def test_the_soak_command_records_its_section_and_fails_on_wrong_results(tmp_path, override_cpu_kernel):
    profile = tmp_path / "p.yaml"
    clean = run_cli(["soak", "--minutes", "0", "--size", "32", "--device", "cpu", "--profile", str(profile),
                     "--json"])
    assert clean.code == 0, clean.stderr
    recorded = load_profile(profile)
    assert recorded.soak is not None and recorded.soak.status == "pass" and recorded.stages["soak"].status == "complete"
    override_cpu_kernel("mm", numpy_mm(wrong_calls={8}))
    failing = run_cli(["soak", "--minutes", "0", "--size", "32", "--device", "cpu", "--profile", str(profile)])
    assert failing.code == 1 and "intermittent wrong results" in failing.stderr


def test_a_negative_soak_length_is_one_line_and_exit_2(tmp_path):
    result = run_cli(["soak", "--minutes", "-1", "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 2 and "Traceback" not in result.stderr


def test_numpy_mm_is_a_faithful_kernel_when_no_fault_is_asked():
    a, b = torch.randn(5, 7), torch.randn(7, 3)
    assert np.allclose(numpy_mm()(a, b).numpy(), (a.double() @ b.double()).numpy(), atol=1e-5)
