"""What the probe records where a device lacks something: the SDPA kernel that really ran, a compile backend that
cannot compile (unsupported, then the eager path as a logged, counted path fallback; --strict refuses it), and
memory read through torch.accelerator where the family's module has no mem_get_info. Hermetic: fakes and the
CPU; tests/emulator/test_probe_stage.py runs the same on the emulated device."""

import json
import logging
from collections import Counter
from types import SimpleNamespace

import pytest
import torch

from bringup.backends.module_backend import ModuleBackend
from bringup.errors import StrictFallbackError
from bringup.fallbacks import FallbackRecorder
from bringup.probes.capabilities.attention import check_sdpa, kernel_ran
from bringup.probes.capabilities.compile_check import check_compile
from bringup.probes.capabilities.stage import record_fallback
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli

MATH_ONLY = Counter({"aten::scaled_dot_product_attention": 1, "aten::_scaled_dot_product_attention_math": 1})


def test_a_requested_kernel_that_did_not_run_is_named_with_what_ran_instead():
    own, ran = kernel_ran("FLASH_ATTENTION", MATH_ONLY)
    assert own is None and ran == "aten::_scaled_dot_product_attention_math"
    own, _ = kernel_ran("MATH", MATH_ONLY)
    assert own == "aten::_scaled_dot_product_attention_math"
    own, _ = kernel_ran("FLASH_ATTENTION", Counter({"aten::_scaled_dot_product_flash_attention_for_cpu": 1}))
    assert own == "aten::_scaled_dot_product_flash_attention_for_cpu"  # the host's variant is the same kernel


def test_sdpa_math_records_the_kernel_that_ran():
    result = check_sdpa(torch.device("cpu"), "MATH")
    assert result["status"] == "supported"
    assert result["details"]["kernels"] == ["aten::_scaled_dot_product_attention_math"]
    assert "(aten::_scaled_dot_product_attention_math ran)" in result["evidence"]


@pytest.fixture
def no_compiler(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no g++, c++ or clang++: inductor cannot build for the host


def test_a_backend_that_cannot_compile_takes_the_eager_path(no_compiler):
    result = check_compile(torch.device("cpu"), "inductor")
    assert result["status"] == "unsupported" and "C++ compiler" in result["reason"]
    fallback = result["details"]["fallback"]
    assert fallback["level"] == "path" and fallback["instead"] == "eager"
    assert fallback["wanted"] == "torch.compile(backend='inductor')" and fallback["why"] == result["reason"]
    assert fallback["eager"].startswith("eager max_rel ")  # the eager path ran, on the same inputs


def test_a_check_that_took_a_fallback_is_logged_and_counted(caplog, monkeypatch):
    recorder = FallbackRecorder()
    result = {"status": "unsupported", "reason": "no", "details": {
        "fallback": {"level": "path", "what": "sample", "wanted": "compiled", "instead": "eager", "why": "no"}}}
    logger = logging.getLogger("bringup")
    monkeypatch.setattr(logger, "propagate", False)  # caplog's handler sees each record once, CLI run before or not
    logger.addHandler(caplog.handler)
    try:
        record_fallback("compile.inductor", result, recorder)
        record_fallback("memory.total", {"status": "supported", "evidence": "x", "details": {}}, recorder)
    finally:
        logger.removeHandler(caplog.handler)
    assert recorder.counts["path"] == 1 and len(recorder.events) == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warned == ["fallback[path] compile.inductor: sample: wanted compiled, using eager because no"]
    with pytest.raises(StrictFallbackError, match="--strict forbids fallbacks"):
        record_fallback("compile.inductor", result, FallbackRecorder(strict=True))


def test_probe_json_counts_the_fallback_and_strict_refuses_it_after_writing(no_compiler, tmp_path):
    profile = tmp_path / "p.yaml"
    args = ["probe", "--device", "cpu", "--only", "compile.inductor", "--no-isolate", "--profile", str(profile)]
    out = run_cli([*args, "--json"])
    assert out.code == 0, out.stderr
    assert json.loads(out.stdout)["fallbacks"]["counts"] == {"op": 0, "path": 1, "global": 0}
    profile.unlink()
    strict = run_cli([*args, "--strict"])
    assert strict.code == 2
    (line,) = [text for text in strict.stderr.splitlines() if text.startswith("error:")]
    assert "fallback[path] compile.inductor" in line and "--strict forbids fallbacks" in line
    assert load_profile(profile).capabilities.compile["inductor"].status == "unsupported"  # written first


class ModuleWithoutMemInfo(ModuleBackend):
    """A family whose torch module has no mem_get_info (an out-of-tree one with only torch.accelerator)."""

    family = torch_device_type = module_name = "privateuseone"

    def module(self):
        return SimpleNamespace(get_device_properties=lambda index: SimpleNamespace(total_memory=999))


def test_memory_comes_through_torch_accelerator_where_the_module_has_no_mem_get_info(monkeypatch):
    asked = []
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: torch.device("privateuseone"))
    monkeypatch.setattr(torch.accelerator, "get_memory_info", lambda index: asked.append(index) or (300, 1000))
    backend = ModuleWithoutMemInfo()
    assert backend.memory(1) == (1000, 300) and asked == [1]
    assert backend.memory_source(1) == "torch.accelerator.get_memory_info"


def test_without_either_memory_api_only_the_properties_total_is_known(monkeypatch):
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda *a: None)
    backend = ModuleWithoutMemInfo()
    assert backend.memory(0) == (999, None)
    assert backend.memory_source(0) == "torch.privateuseone.get_device_properties().total_memory"
