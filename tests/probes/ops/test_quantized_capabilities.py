"""Quantized matmul capabilities: proven by the kernels' own verify-ops cases, refused when a kernel is wrong."""

import json

import pytest
import torch
import torch.nn.functional as F

from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli

CHECKS = ("features.int8_weight_only_matmul", "features.int4_weight_only_matmul", "features.fp8_scaled_mm")


def _probe(tmp_path, *checks):
    args = [arg for check in checks for arg in ("--only", check)]
    result = run_cli(["probe", "--no-isolate", "--json", "--profile", str(tmp_path / "p.yaml"), *args])
    return result, json.loads(result.stdout)


def test_each_quantized_capability_is_decided_with_evidence_or_a_reason(tmp_path):
    result, doc = _probe(tmp_path, *CHECKS)
    assert result.code == 0, result.stderr
    results = doc["capabilities"]
    for check in CHECKS:
        r = results[check]
        assert r["status"] in ("supported", "unsupported"), r
        if r["status"] == "supported":
            assert "vs float64 dequantized reference" in r["evidence"] and "decode [1," in r["evidence"]
            assert "prefill [64," in r["evidence"] and r["details"]["kernel"] in r["evidence"]
        else:
            assert r["reason"]
    profile = load_profile(tmp_path / "p.yaml")
    assert set(profile.capabilities.features) == {c.split(".")[1] for c in CHECKS}


def test_a_wrong_int8_kernel_makes_int8_weight_only_unsupported_and_says_why(tmp_path, override_cpu_kernel):
    if not hasattr(torch.ops.aten, "_weight_int8pack_mm"):
        pytest.skip(f"this torch ({torch.__version__}) has no aten._weight_int8pack_mm")
    override_cpu_kernel("_weight_int8pack_mm",
                        lambda x, w, s: F.linear(x, w.to(x.dtype) * s[:, None].to(x.dtype)) * 1.01)
    _result, doc = _probe(tmp_path, "features.int8_weight_only_matmul")
    results = doc["capabilities"]
    r = results["features.int8_weight_only_matmul"]
    assert r["status"] == "unsupported"
    assert "_weight_int8pack_mm[float32] decode" in r["reason"] and "fail" in r["reason"]
    assert "outside rtol" in r["reason"]
