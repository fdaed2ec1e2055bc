"""int8/int4 weights on a real trained model (SmolLM2-135M-Instruct): the engine's decode steps equal the
module-level reference of the same quantized weights, and `bringup eval --quantization int4` on the Q4_1 GGUF
reports its KL divergence from the unquantized model (reported, not assumed); served as int4, the Q4_1 file's blocks
load straight (re-packed)."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.quantize.held_blocks import origin, record_requantized
from bringup.runner.sources.gguf.reader import open_gguf
from bringup.runner.sources.gguf.tensors import TensorValues
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.formats.integer import dequantize_int4
from bringup.runner.weights.held import LinearWeightTypes
from bringup.runner.weights.kinds import INT4, INT4_DEQUANT, INT8
from tests.cli.run_cli import run_cli
from tests.real_model import smollm2_gguf, smollm2_hf_dir
from tests.runner.host_compiler import needs_compiler
from tests.runner.quantized_parity import assert_decode_matches_reference
from tests.runner.stated import stated


@pytest.fixture(scope="module")
def smollm2():
    return smollm2_hf_dir()


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4])
def test_decode_steps_equal_the_reference_of_the_same_quantized_weights(smollm2, scheme, tmp_path):
    engine = LLMEngine.create(EngineOptions(model_dir=smollm2, device="cpu", profile_path=tmp_path / "p.yaml",
                                            max_model_len=128, max_num_seqs=1, measurements=stated(),
                                            quantization=scheme))
    prompt = engine.tokenizer.encode("The capital of France is")
    tokens = assert_decode_matches_reference(engine, smollm2, scheme, prompt)
    print(f"SmolLM2 {scheme}: {engine.tokenizer.decode(tokens)!r}")


@needs_compiler
def test_int4_eval_reports_its_kl_divergence_from_the_unquantized_model(tmp_path):
    result = run_cli(["eval", "--model", str(smollm2_gguf()), "--device", "cpu", "--profile", str(tmp_path / "p.yaml"),
                      "--quantization", "int4", "--ctx", "128", "--stride", "64", "--max-tokens", "192", "--reference",
                      "float64", "--json"])
    assert result.code == 0, result.stderr
    reference = json.loads(result.stdout)["reference"]
    print(f"SmolLM2 Q4_1 GGUF served as int4 vs float64 unquantized over {json.loads(result.stdout)['scored']} "
          f"tokens: KLD mean {reference['kld_mean']:.4f}, top-1 agreement {reference['top1_agreement']:.3f}, "
          f"delta ppl {reference['delta_ppl']:+.3f}")
    assert reference["source"] == "float64" and reference["exact"]
    assert 0 < reference["kld_mean"] < 1.0  # the scheme changed the model, and it still predicts the same text
    assert reference["top1_agreement"] > 0.5


def test_the_q4_1_file_served_as_int4_loads_its_blocks_straight():
    """The file's 210 Q4_1 layer weights re-packed (stored rows dequantize to gguf's own values, q/k rows unpermuted),
    the tied head's Q8_0 blocks quantized at load: no fallback for the weights, and the plan row says so. (The
    source as the engine loads it, without an engine's start-up around it: a few seconds.)"""
    path = smollm2_gguf()
    source = model_source(path)
    weights = source.linear_weight_types()
    assert weights == LinearWeightTypes({"Q4_1": 210}, "Q8_0")
    assert origin(INT4, weights) == ("from the file's Q4_1 blocks, re-packed (no re-quantization); the head's Q8_0 "
                                     "blocks dequantized and quantized at load (round to nearest)")
    recorder = FallbackRecorder(strict=True)
    record_requantized(INT4, weights, recorder)  # --strict would refuse a fallback here
    config = source.config()
    model = source.load(config, torch.float32, torch.device("cpu"), WeightLayout(INT4_DEQUANT, INT4_DEQUANT, 0),
                        checked=True)
    values = TensorValues(open_gguf(path), config, rope_permuted_file=True)
    for i in (0, len(model.layers) - 1):
        attention, mlp, prefix = model.layers[i].self_attn, model.layers[i].mlp, f"model.layers.{i}."
        qkv = torch.cat([values.get(f"{prefix}self_attn.{p}_proj.weight") for p in "qkv"])
        assert torch.equal(dequantize_int4(attention.qkv_proj.weight(INT4_DEQUANT)), qkv)
        down = values.get(f"{prefix}mlp.down_proj.weight")
        assert torch.equal(dequantize_int4(mlp.down_proj.weight(INT4_DEQUANT)), down)
