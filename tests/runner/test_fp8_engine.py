"""The runner serving fp8 weights (`--quantization fp8`) on a small random Llama: decode steps equal the module-level
reference of the same fp8 weights, the plan row says how they are applied and why, `none` and `fp8` plans agree on
everything else, and a device without float8 storage is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.plan.quantize.scheme import requested_scheme, scheme_why_not
from bringup.runner.weights.formats.fp8 import FP8_DTYPE, dequantize_fp8, quantize_fp8
from bringup.runner.weights.kinds import FP8
from tests.cli.run_cli import run_cli
from tests.runner.quantized_parity import assert_decode_matches_reference, start_quantized, tiny_quantizable_model

PROMPT = [0, 5, 9, 33, 80, 7, 120, 64, 12]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_quantizable_model(tmp_path_factory, "tiny-llama-fp8")



@pytest.fixture(scope="module")
def engines(tiny, tmp_path_factory) -> dict[str, LLMEngine]:
    work = tmp_path_factory.mktemp("fp8-plans")
    return {scheme: start_quantized(tiny, work, scheme) for scheme in ("none", FP8)}


def test_fp8_storage_is_e4m3_codes_times_a_row_scale_of_max_over_448():
    w = torch.tensor([[1.0, -2.0, 0.5, 3.0], [0.0, 0.0, 0.0, 0.0], [448.0, 1.0, -0.25, 7.0]])
    stored = quantize_fp8(w)
    assert stored.dtype == torch.uint8 and stored.shape == (3, 4 + 4)
    scale = stored[:, 4:].contiguous().view(torch.float32).reshape(-1)
    assert torch.equal(scale, torch.tensor([3.0, 0.0, 448.0]) / 448)  # in float32
    codes = stored[:, :4].contiguous().view(FP8_DTYPE).float()
    assert codes[0].tolist() == (w[0] / (3.0 / 448)).to(FP8_DTYPE).float().tolist()
    assert codes[1].tolist() == [0.0] * 4  # an all-zero row: zero scale, zero codes, no NaN
    assert torch.equal(dequantize_fp8(stored)[2], torch.tensor([448.0, 1.0, -0.25, 7.0]))  # e4m3 holds these


def test_decode_steps_equal_the_reference_of_the_same_fp8_weights(engines, tiny):
    assert_decode_matches_reference(engines[FP8], tiny, FP8, PROMPT)


def test_none_and_fp8_plans_differ_only_in_the_weights(engines):
    rows = {scheme: {name: (value, evidence) for name, value, evidence in engines[scheme].plan.rows()}
            for scheme in ("none", FP8)}
    none, fp8 = rows["none"], rows[FP8]
    assert fp8["quantization"][0] == FP8
    evidence = fp8["quantization"][1]
    assert "float8_e4m3fn weights with a float32 scale per output channel (max / 448), weight-only" in evidence
    assert "applied as dequantize + F.linear in float32: torch's _scaled_mm" in evidence
    assert fp8["weight_layout"][0] == FP8 and none["weight_layout"][0] != FP8
    for name in set(none) - {"quantization", "weight_layout", "kv_blocks", "decode_layers"}:
        assert none[name] == fp8[name], name
    # a byte per weight and 4 per row instead of 4 per weight; the embedding and norms stay float32
    assert engines[FP8].executor.model.weight_bytes() < engines["none"].executor.model.weight_bytes() / 2


def test_a_device_without_float8_storage_is_refused_in_one_line(engines):
    config = engines[FP8].executor.model.config
    meta = torch.device("meta")  # a real torch device that casts lazily and holds no values to read back
    why = scheme_why_not(FP8, meta, config)
    assert why is not None and why.startswith("fp8 needs float8 weights: meta has no float8_e4m3fn storage or casts")
    with pytest.raises(BringupError) as caught:
        requested_scheme(FP8, meta, config, FallbackRecorder())
    assert "\n" not in str(caught.value) and "use --quantization none (or auto)" in str(caught.value)


def test_generate_serves_fp8_through_the_cli_and_says_so(tiny, tmp_path):
    result = run_cli(["generate", "the quick", "--model", str(tiny), "--device", "cpu", "--profile",
                      str(tmp_path / "p.yaml"), "--quantization", "fp8", "--max-tokens", "3", "--json"])
    assert result.code == 0, result.stdout + result.stderr
    plan = json.loads(result.stdout)["plan"]
    assert plan["quantization"]["value"] == FP8 and plan["weight_layout"]["value"] == FP8


def test_auto_measures_fp8_on_the_model_and_serves_what_it_says(tiny, tmp_path):
    engine = start_quantized(tiny, tmp_path, "auto")
    choice = engine.plan.quantization
    assert "fp8: KLD " in choice.evidence and "ms unquantized" in choice.evidence  # measured, whichever wins
    kinds = engine.executor.model.layout.kinds
    if choice.value == FP8:
        assert kinds == [FP8] and "its float8 casts checked out here" in choice.evidence
    else:
        assert FP8 not in kinds
