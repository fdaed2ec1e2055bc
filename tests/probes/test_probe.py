import json
import os

import pytest

from bringup.errors import BringupError
from bringup.probes.capabilities.compile_check import check_compile
from bringup.probes.capabilities.registry import EXTRA_CHECKS_ENV, select_checks
from bringup.probes.capabilities.stage import run_probe
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli


def test_cpu_dtypes_are_checked_with_evidence():
    ids = select_checks(["dtypes"], None)
    results = run_probe(ids, "cpu", isolate=False)
    for name in ("float32", "float64", "bfloat16", "float16", "int8"):
        r = results[f"dtypes.{name}"]
        assert r["status"] == "supported", r
        assert "vs" in r["evidence"] or "exact" in r["evidence"]
    assert results["dtypes.float64"]["details"]["matmul_rel_err"] <= 1e-12
    float8 = [k for k in results if k.startswith("dtypes.float8_")]
    assert float8, "this torch knows float8 types, so they must be probed"
    for key in float8:
        r = results[key]
        assert r["status"] in ("supported", "unsupported")
        assert r.get("evidence") if r["status"] == "supported" else r.get("reason")


def test_attention_backends_on_cpu():
    results = run_probe(select_checks(["attention"], None), "cpu", isolate=False)
    math = results["attention.sdpa_math"]
    assert math["status"] == "supported" and "float32 max_rel" in math["evidence"]
    efficient = results["attention.sdpa_efficient"]
    assert efficient["status"] == "unsupported" and efficient["reason"]


def test_only_and_skip_selection():
    assert select_checks(["dtypes.float32", "memory"], None) == [
        "dtypes.float32", "memory.total", "memory.free", "memory.allocation"]
    assert not any(i.startswith("compile.") for i in select_checks(None, ["compile"]))
    with pytest.raises(BringupError, match="unknown probe check 'dtype'"):
        select_checks(["dtype"], None)


def test_hanging_crashing_and_raising_checks_do_not_stop_the_probe(monkeypatch):
    monkeypatch.setenv(
        EXTRA_CHECKS_ENV,
        "x.hang=tests.probes.faulty_checks:hangs,x.abort=tests.probes.faulty_checks:aborts,"
        "x.raise=tests.probes.faulty_checks:raises,x.fine=tests.probes.faulty_checks:fine",
    )
    results = run_probe(["x.hang", "x.abort", "x.raise", "x.fine"], "cpu", isolate=True, timeout_s=4)
    assert results["x.hang"]["status"] == "unknown" and "did not finish within 4s" in results["x.hang"]["reason"]
    assert results["x.abort"]["status"] == "unsupported" and "signal 6" in results["x.abort"]["reason"]
    assert results["x.raise"]["status"] == "unsupported" and "driver said no" in results["x.raise"]["reason"]
    assert results["x.fine"] == {"status": "supported", "evidence": "ran on cpu", "seconds": pytest.approx(0, abs=1)}


def test_compile_without_a_cxx_compiler_is_unsupported(monkeypatch, tmp_path):
    import torch

    monkeypatch.setenv("PATH", str(tmp_path))
    result = check_compile(torch.device("cpu"), "inductor")
    assert result["status"] == "unsupported" and "C++ compiler" in result["reason"]


def test_aot_eager_compile_is_supported():
    import torch

    result = check_compile(torch.device("cpu"), "aot_eager")
    assert result["status"] == "supported" and result["details"]["compile_s"] >= 0


def test_probe_cli_writes_capabilities(tmp_path):
    path = tmp_path / "cpu.yaml"
    out = run_cli(["probe", "--only", "dtypes.float32", "--only", "memory", "--profile", str(path), "--json"])
    assert out.code == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["capabilities"]["dtypes.float32"]["status"] == "supported"
    profile = load_profile(path)
    assert profile.capabilities.dtypes["float32"].status == "supported"
    assert profile.capabilities.memory["allocation"].status == "supported"
    assert profile.stages["probe"].status == "partial"
    assert os.path.exists(path)
