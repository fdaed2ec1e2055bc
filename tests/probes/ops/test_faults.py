"""Real faults in real CPU kernels (overridden with torch.library for the test) must be caught."""

import json
import math

import numpy as np
import pytest
import torch

from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli

OPS = ["--op", "exp", "--op", "sigmoid", "--op", "tanh", "--op", "relu", "-k", "odd|non-contiguous|empty"]


def _run(tmp_path, *args):
    result = run_cli(["verify-ops", "--no-isolate", "--json", "--dtype", "float32",
                      "--profile", str(tmp_path / "p.yaml"), *OPS, *args])
    return result, json.loads(result.stdout)


def _np_exp(t: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(np.exp(t.contiguous().numpy()))


def test_clean_run_passes_everything(tmp_path):
    result, doc = _run(tmp_path)
    assert result.code == 0, result.stderr
    assert {c["status"] for c in doc["cases"]} == {"pass"} and doc["verified"] and len(doc["cases"]) == 12
    profile = load_profile(tmp_path / "p.yaml")
    assert len(profile.ops) == len(doc["cases"]) and profile.stages["verify-ops"].status == "complete"


def test_slightly_wrong_exp_fails_exactly_exp(tmp_path, override_cpu_kernel):
    # float32 only: the float64 reference keeps the real kernel, like a device bug would
    override_cpu_kernel("exp", lambda t: _np_exp(t) * (1 + 1e-3) if t.dtype == torch.float32 else _np_exp(t))
    result, doc = _run(tmp_path)
    assert result.code == 1
    failed = {c["op"] for c in doc["cases"] if c["status"] != "pass"}
    assert failed == {"exp"}
    exp_cases = [c for c in doc["cases"] if c["op"] == "exp" and c["case"] != "empty [0,7]"]
    assert exp_cases and all(c["status"] == "fail" for c in exp_cases)
    for c in exp_cases:
        assert c["max_rel"] == pytest.approx(1e-3, rel=0.01)
        assert c["worst_index"] is not None and "outside the error bound" in c["message"]


def test_nan_from_sigmoid_fails_sigmoid_with_its_index(tmp_path, override_cpu_kernel):
    def sigmoid_with_nan(t: torch.Tensor) -> torch.Tensor:
        out = torch.from_numpy(1.0 / (1.0 + np.exp(-t.contiguous().numpy())))
        if t.dtype == torch.float32 and out.numel() > 3:
            out.view(-1)[3] = math.nan
        return out

    override_cpu_kernel("sigmoid", sigmoid_with_nan)
    result, doc = _run(tmp_path)
    assert result.code == 1
    bad = [c for c in doc["cases"] if c["status"] != "pass"]
    assert {c["op"] for c in bad} == {"sigmoid"} and all(c["status"] == "fail" for c in bad)
    first = next(c for c in bad if c["case"] == "odd [3,37,101]")
    assert first["worst_index"] == [0, 0, 3] and "non-finite" in first["message"]


def test_out_of_bounds_write_is_caught_by_the_guard_region(tmp_path, override_cpu_kernel):
    def exp_out_past_the_end(t: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        out.copy_(_np_exp(t).reshape(out.shape))
        if out.numel():
            tail = torch.as_strided(out, (out.numel() + 3,), (1,), out.storage_offset())[out.numel():]
            tail.fill_(0.0)
        return out

    override_cpu_kernel("exp.out", exp_out_past_the_end)
    result, doc = _run(tmp_path)
    assert result.code == 1
    bad = [c for c in doc["cases"] if c["status"] != "pass"]
    assert bad and {c["op"] for c in bad} == {"exp"}
    assert all("guard region after overwritten" in c["message"] for c in bad)
    # the functional exp itself was right: the metrics show no error
    assert all(c["max_abs"] is not None and c["max_rel"] < 1e-6 for c in bad)


def test_every_case_unsupported_is_nothing_verified(tmp_path):
    result = run_cli(["verify-ops", "--no-isolate", "--op", "sdpa_efficient", "--dtype", "float32",
                      "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 1
    assert "nothing verified" in result.stdout
    profile = load_profile(tmp_path / "p.yaml")
    assert profile.ops and all(r.status == "unsupported" and r.message for r in profile.ops)
