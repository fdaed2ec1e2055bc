"""The runner serving int8/int4 weights on a small random Llama: decode steps equal the module-level reference of
the same quantized weights, the plan says what it chose and why, `none` and `int8` plans agree on everything else,
and a wrong kernel (a real faulty build in the kernel cache) keeps `auto` from quantizing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.host.paged_decode import HOST_KERNELS
from bringup.runner.weights.kernels import build as host_build
from bringup.runner.weights.kinds import INT4, INT4_G64, INT4_G128, INT8
from tests.cli.run_cli import run_cli
from tests.runner.host_compiler import needs_compiler
from tests.runner.quantized_parity import assert_decode_matches_reference, start_quantized, tiny_quantizable_model

PROMPT = [0, 5, 9, 33, 80, 7, 120, 64, 12]
KERNEL_SOURCES = (("panel_linear.cpp", host_build.KERNELS), ("paged_decode.cpp", HOST_KERNELS),
                  ("decode_layers.cpp", HOST_KERNELS), ("quantized_linear.cpp", host_build.KERNELS))
# the faults, at the dispatch every instruction-set path shares: int8 results scaled by 1.5, int4 results halved
SCALED = "for (int r = 0; r < ROWS; ++r) for (int t = 0; t < NT; ++t) for (int i = 0; i < QTILE; ++i) " \
         "out[r][t][i] *= {};"
FAULTS = {"if (format == FORMAT_INT8) quantized_tiles<ROWS, NT, FORMAT_INT8>(rows, tiles, stride, height, out);":
          "if (format == FORMAT_INT8) { quantized_tiles<ROWS, NT, FORMAT_INT8>(rows, tiles, stride, height, out); "
          + SCALED.format("1.5f") + " }",
          "else quantized_int4_tiles<ROWS, NT>(format, rows, tiles, stride, height, out);":
          "else { quantized_int4_tiles<ROWS, NT>(format, rows, tiles, stride, height, out); " + SCALED.format("0.5f")
          + " }"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_quantizable_model(tmp_path_factory, "tiny-llama")



@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> Path:
    """Every linear input a multiple of 128: int4_g128's groups fit."""
    return tiny_quantizable_model(tmp_path_factory, "wide-llama", hidden=128)


@pytest.fixture(scope="module")
def engines(tiny, tmp_path_factory) -> dict[str, LLMEngine]:
    work = tmp_path_factory.mktemp("plans")
    return {scheme: start_quantized(tiny, work, scheme) for scheme in ("none", INT8, INT4, INT4_G64)}


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4, INT4_G64])
def test_decode_steps_equal_the_reference_of_the_same_quantized_weights(engines, tiny, scheme):
    assert_decode_matches_reference(engines[scheme], tiny, scheme, PROMPT)


@needs_compiler
def test_int4_in_groups_of_128_decodes_as_its_reference_and_says_so(wide, tmp_path):
    engine = start_quantized(wide, tmp_path, INT4_G128)
    row = dict((name, evidence) for name, _, evidence in engine.plan.rows())["quantization"]
    assert "int4 weights with a scale and a minimum per group of 128 (float16 d and m)" in row
    assert_decode_matches_reference(engine, wide, INT4_G128, PROMPT)
    # d and m (2 bytes each) per 128 weights and half a byte per weight: 68 bytes per 128
    qkv = engine.executor.model.layers[0].self_attn.qkv_proj.weight(INT4_G128)
    assert qkv.shape[1] == 128 // 128 * 68


def test_groups_that_do_not_divide_a_layer_are_refused_in_one_line(tiny, tmp_path):
    result = run_cli(["generate", "hi", "--model", str(tiny), "--device", "cpu", "--profile", str(tmp_path / "p.yaml"),
                      "--quantization", "int4_g128"])
    assert result.code == 2
    assert "--quantization int4_g128: a layer has 64 input features are not a multiple of the quantization block " \
           "of 128" in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


@needs_compiler
def test_none_and_int8_plans_differ_only_in_the_weights(engines):
    rows = {scheme: {name: (value, evidence) for name, value, evidence in engines[scheme].plan.rows()}
            for scheme in ("none", INT8)}
    none, int8 = rows["none"], rows[INT8]
    assert none["quantization"] == ("none", "not requested (--quantization none): the plan dtype's weights")
    assert int8["quantization"][0] == INT8
    assert "int8 weights with a scale per block of 32 (Q8_0's values and float16 scale)" in int8["quantization"][1]
    assert "bringup's host kernel matched dequantize + F.linear on a check here" in int8["quantization"][1]
    assert int8["weight_layout"][0] == INT8 and none["weight_layout"][0] != INT8
    for name in set(none) - {"quantization", "weight_layout", "kv_blocks", "decode_layers"}:
        assert none[name] == int8[name], name
    assert engines["none"].executor.model.layout.kinds != [INT8]
    # a byte per weight and 4 per row instead of 4 per weight; the embedding and norms stay float32
    assert engines[INT8].executor.model.weight_bytes() < engines["none"].executor.model.weight_bytes() / 2


def test_an_unknown_scheme_is_refused_in_one_line(tiny, tmp_path):
    result = run_cli(["generate", "hi", "--model", str(tiny), "--device", "cpu", "--profile", str(tmp_path / "p.yaml"),
                      "--quantization", "int3"])
    assert result.code == 2
    assert "--quantization 'int3' is not one of none, int8, int4, int4_g64, int4_g128, fp8, auto" in result.stderr
    assert "Traceback" not in result.stderr


@needs_compiler
def test_selftest_compares_against_float64_of_the_same_quantized_weights(tiny, tmp_path):
    result = run_cli(["selftest", "--model", str(tiny), "--device", "cpu", "--profile", str(tmp_path / "p.yaml"),
                      "--quantization", "int4", "--steps", "8"])
    assert result.code == 0, result.stdout + result.stderr
    assert "selftest pass" in result.stdout
    assert "int4 weights vs float64 of the same int4 weights (dequantized)" in " ".join(result.stdout.split())


def faulty_kernel_cache(tmp_path: Path, faults: dict[str, str]) -> Path:
    """A kernel cache holding every library built as usual except quantized_linear.cpp, built with `faults` (text of
    its product, quantized_tile.h, replaced) under the name the sound source's library has: what a wrong build left
    in a cache looks like."""
    cache = tmp_path / "kernels"
    cache.mkdir()
    for name, folder in KERNEL_SOURCES:
        host_build.load(name, folder)
        shutil.copy(host_build.library_path(name, folder), cache / host_build.library_path(name, folder).name)
    header = (host_build.KERNELS / "quantized_tile.h").read_text()
    for sound, wrong in faults.items():
        assert sound in header  # the fault is real: the line it corrupts exists
        header = header.replace(sound, wrong)
    (tmp_path / "quantized_tile.h").write_text(header)
    wrong_source = tmp_path / "quantized_linear.cpp"
    shutil.copy(host_build.KERNELS / "quantized_linear.cpp", wrong_source)
    target = cache / host_build.library_path("quantized_linear.cpp").name
    subprocess.run(host_build.compile_args(wrong_source, target), check=True, timeout=host_build.BUILD_TIMEOUT_S)
    return cache


def generate_json(model: Path, work: Path, cache: Path, quantization: str) -> tuple[dict, str]:
    env = {**os.environ, "BRINGUP_KERNEL_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "bringup", "generate", "The", "--model", str(model), "--device",
                           "cpu", "--profile", str(work / "p.yaml"), "--max-tokens", "2", "--max-model-len", "128",
                           "--quantization", quantization, "--json"], capture_output=True, text=True, env=env,
                          cwd=work, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


@needs_compiler
def test_auto_does_not_quantize_with_a_wrong_kernel_and_says_why(tiny, tmp_path):
    cache = faulty_kernel_cache(tmp_path, FAULTS)
    data, _ = generate_json(tiny, tmp_path, cache, "auto")
    quantization = data["plan"]["quantization"]
    assert quantization["value"] == "none"
    assert "int8 not tried: int8 kernel result differs from dequantize + F.linear by 0.5" in quantization["evidence"]
    assert "int4 not tried: int4 kernel result differs from dequantize + F.linear by" in quantization["evidence"]
    assert data["plan"]["weight_layout"]["value"] not in (INT8, INT4)


@needs_compiler
def test_a_requested_scheme_with_a_wrong_kernel_falls_back_to_the_reference_with_a_warning(tiny, tmp_path):
    cache = faulty_kernel_cache(tmp_path, FAULTS)
    data, stderr = generate_json(tiny, tmp_path, cache, INT8)
    quantization = data["plan"]["quantization"]
    assert quantization["value"] == INT8
    assert "applied as dequantize + F.linear: the kernel int8 kernel result differs" in quantization["evidence"]
    assert data["plan"]["weight_layout"]["value"] == "int8_dequant"
    assert "int8 linear" in stderr and "dequantize + F.linear (float32)" in stderr  # the WARNING


@needs_compiler
def test_auto_measures_each_scheme_on_the_model_and_serves_what_it_says(tiny, tmp_path):
    engine = start_quantized(tiny, tmp_path, "auto")
    choice = engine.plan.quantization
    for scheme in (INT8, INT4):  # both kernels check out here, so both are measured (which wins is the machine's)
        assert f"{scheme}: KLD " in choice.evidence and "nats/token over" in choice.evidence
        assert "ms unquantized" in choice.evidence
    kinds = engine.executor.model.layout.kinds
    if choice.value == "none":
        assert "auto: no scheme had every piece of evidence" in choice.evidence
        assert not set(kinds) & {INT8, INT4}
    else:
        assert kinds == [choice.value] and engine.plan.weight_layout.value == choice.value
