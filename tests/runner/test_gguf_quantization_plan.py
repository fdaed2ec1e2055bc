"""What the plan says and does with a GGUF file's quantized blocks, through the real CLI: the matching scheme (asked
or auto) uses them re-packed, `none` dequantizes them, a scheme that must round them again is a recorded fallback
(WARNING, counted, refused by --strict in one line), and auto does not try such a scheme."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bringup.runner.engine.auto_quantization.held_candidates import load_held_candidates
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.quantize.held_blocks import auto_candidates_for
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.formats.integer import dequantize_int8
from bringup.runner.weights.kinds import INT4, INT8, OUT_IN
from tests.cli.run_cli import run_cli
from tests.runner.gguf_files import T, write_gguf
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import stated


def blocks_of(kind: object):
    return lambda name, tensor: T.F32 if tensor.dim() == 1 else kind


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """A tiny llama as a Q8_0 file and as a Q4_0 file."""
    work = tmp_path_factory.mktemp("gguf")
    hf = make_hf_model(work / "hf", "llama", tied=True)
    return {name: write_gguf(work / f"{name}.gguf", hf, work / "hf", "llama", blocks_of(kind))
            for name, kind in (("q8_0", T.Q8_0), ("q4_0", T.Q4_0))}


def generate(model: Path, work: Path, *flags: str):
    return run_cli(["generate", "hello", "--model", str(model), "--device", "cpu", "--profile", str(work / "p.yaml"),
                    "--max-tokens", "2", "--max-model-len", "128", *flags])


def plan_and_fallbacks(model: Path, work: Path, quantization: str) -> tuple[dict, dict, str]:
    result = generate(model, work, "--quantization", quantization, "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    return data["plan"], data["fallbacks"], result.stderr


@needs_compiler
@pytest.mark.parametrize("name, scheme", [("q8_0", INT8), ("q4_0", INT4), ("q4_0", INT8)])
def test_the_matching_scheme_uses_the_files_blocks_and_says_so(files, tmp_path, name, scheme):
    plan, fallbacks, stderr = plan_and_fallbacks(files[name], tmp_path, scheme)
    row = plan["quantization"]
    assert row["value"] == scheme
    assert f"from the file's {name.upper()} blocks, re-packed (no re-quantization)" in row["evidence"]
    assert "quantized at load" not in row["evidence"]
    assert not [e for e in fallbacks["events"] if e["what"] == f"{scheme} weights"]
    assert "quantized again" not in stderr


def test_none_dequantizes_the_blocks_and_says_so(files, tmp_path):
    plan, _, _ = plan_and_fallbacks(files["q4_0"], tmp_path, "none")
    assert plan["quantization"] == {"value": "none", "shown": "none", "evidence": "not requested (--quantization "
                                    "none): the plan dtype's weights, the file's Q4_0 blocks dequantized at load"}


@needs_compiler
def test_a_scheme_that_rounds_the_blocks_again_is_a_recorded_fallback(files, tmp_path):
    plan, fallbacks, stderr = plan_and_fallbacks(files["q8_0"], tmp_path, INT4)
    assert plan["quantization"]["value"] == INT4
    assert "its Q8_0 blocks dequantized and quantized again (a second rounding: a recorded fallback)" in \
        plan["quantization"]["evidence"]
    [event] = [e for e in fallbacks["events"] if e["what"] == "int4 weights"]
    assert event["instead"] == "them dequantized and quantized again to int4 (a second rounding)"
    assert "--quantization int8 loads them straight" in event["why"]
    assert "fallback[op] int4 weights: wanted the file's Q8_0 blocks kept as they are" in " ".join(stderr.split())


def test_strict_refuses_rounding_the_blocks_again_in_one_line(files, tmp_path):
    result = generate(files["q8_0"], tmp_path, "--quantization", INT4, "--strict")
    assert result.code == 2
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "int4 weights: wanted the file's Q8_0 blocks kept as they are, using them dequantized and quantized " \
           "again to int4" in line
    assert line.endswith("(refused: --strict forbids fallbacks)")
    assert "Traceback" not in result.stderr


def test_auto_does_not_try_a_scheme_that_rounds_the_blocks_again(files, tmp_path):
    notes: list[str] = []
    assert auto_candidates_for([INT8, INT4], notes, model_source(files["q8_0"]).linear_weight_types()) == [INT8]
    assert notes == ["int4 not tried: it would quantize the file's Q8_0 blocks again (--quantization int4 does that, "
                     "as a recorded fallback)"]
    plan, _, _ = plan_and_fallbacks(files["q8_0"], tmp_path, "auto")  # the kernels that check out here are tried
    evidence = plan["quantization"]["evidence"]
    assert plan["quantization"]["value"] != INT4 and "int4: KLD" not in evidence
    if plan["quantization"]["value"] == INT8:  # int8 checked out and measured faster here: the file's blocks
        assert "from the file's Q8_0 blocks, re-packed (no re-quantization)" in evidence


def test_auto_measures_a_scheme_on_the_files_own_blocks(files, tmp_path):
    """The int8 weights auto measures on a Q8_0 file are the file's blocks re-packed (their values gguf's own), not
    the dequantized weights rounded again; int4 would round them again, so it gets none."""
    engine = LLMEngine.create(EngineOptions(model_dir=files["q8_0"], device="cpu", profile_path=tmp_path / "p.yaml",
                                            max_model_len=128, max_num_seqs=1, measurements=stated()))
    model, source = engine.executor.model, model_source(files["q8_0"])
    config = model.config
    held = load_held_candidates(model, source, config, torch.float32, source.linear_weight_types(), [INT8, INT4])
    assert held == [INT8] and INT8 in model.stored_kinds and INT4 not in model.stored_kinds
    floats = source.load(config, torch.float32, torch.device("cpu"), WeightLayout(OUT_IN, OUT_IN, 0))
    for ours, values in zip(model.linear_layers(), floats.linear_layers(), strict=True):
        assert torch.equal(dequantize_int8(ours.weight(INT8)), values.weight(OUT_IN))
