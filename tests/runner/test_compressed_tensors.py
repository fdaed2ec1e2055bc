"""Pre-quantized compressed-tensors checkpoints (written here in the layout vLLM reads): FP8 weights serve the same
tokens as bringup's own `--quantization fp8` of the same weights, int8 weights serve what they dequantize to, and
every other quantization is refused by name in one line through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.weights.kinds import FP8
from bringup.runner.weights.registry import to_out_in
from tests.cli.run_cli import run_cli
from tests.runner.compressed_tensors_files import (
    DYNAMIC_TOKENS,
    edit_config,
    generate,
    quantization,
    write_compressed,
    write_dequantized,
)
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.stated import stated

PROMPT = [0, 5, 9, 33, 80, 7, 120, 64, 12]
DOWN = "model.layers.1.mlp.down_proj.weight"
TOKENS = 24
USE = "is not loaded by bringup; use the unquantized model or a GGUF Q8_0/Q4_0/Q4_1 file"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny-llama-ct") / "m"
    make_hf_model(path, hidden=64, intermediate=128, layers=2, vocab=320)
    return path


def start(model: Path, work: Path, quantization: str = "none") -> LLMEngine:
    return LLMEngine.create(EngineOptions(model_dir=model, device="cpu", profile_path=work / "p.yaml",
                                          max_model_len=128, max_num_seqs=1, measurements=stated(),
                                          quantization=quantization))


def greedy(engine: LLMEngine) -> list[int]:
    params = SamplingParams(max_tokens=TOKENS, temperature=0.0, ignore_eos=True)
    return engine.generate([PROMPT], params)[0].token_ids


@pytest.fixture(scope="module")
def tiny_qwen2(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tiny-qwen2-ct") / "m"
    make_hf_model(path, "qwen2", hidden=64, intermediate=128, layers=2, vocab=320)  # q, k and v carry biases
    return path


@pytest.mark.parametrize("family", ["tiny", "tiny_qwen2"])
def test_an_fp8_checkpoint_serves_the_tokens_of_bringups_fp8_of_the_same_weights(request, tmp_path, family):
    model = request.getfixturevalue(family)
    checkpoint = write_compressed(model, tmp_path / "fp8", "float-quantized")
    stored, ours = start(checkpoint, tmp_path), start(model, tmp_path, FP8)
    for theirs, mine in zip(stored.executor.model.linear_layers(), ours.executor.model.linear_layers(), strict=True):
        assert torch.equal(theirs.weight(FP8), mine.weight(FP8))  # the same codes and scales, head included
    quantization = stored.plan.quantization
    assert quantization.value == FP8 and stored.plan.weight_layout.value == FP8
    assert quantization.evidence.startswith("from the checkpoint's compressed-tensors float-quantized fp8 weights "
                                            "(a scale per output channel, symmetric), loaded as stored")
    assert greedy(stored) == greedy(ours)


def test_a_per_tensor_fp8_checkpoint_with_dynamic_activations_and_a_plain_head_loads_through_the_cli(tiny, tmp_path):
    checkpoint = write_compressed(tiny, tmp_path / "fp8t", "float-quantized", "tensor", ignore=("lm_head",),
                                  activations=DYNAMIC_TOKENS)
    result = generate(checkpoint, tmp_path, "--json")
    assert result.code == 0, result.stdout + result.stderr
    quantization = json.loads(result.stdout)["plan"]["quantization"]
    assert quantization["value"] == FP8
    assert "fp8 weights (one scale per weight, symmetric)" in quantization["evidence"]
    assert "its dynamic per-token activation quantization is not applied: served weight-only" in \
        quantization["evidence"]
    engine = start(checkpoint, tmp_path)
    head = engine.executor.model.lm_head.weight(FP8)
    assert head.dtype == torch.float32  # the ignored head is served as the checkpoint stores it, not quantized


@pytest.mark.parametrize("fmt", ["int-quantized", "pack-quantized"])
def test_an_int8_checkpoint_serves_the_weights_it_dequantizes_to(tiny, tmp_path, fmt):
    checkpoint = write_compressed(tiny, tmp_path / "int8", fmt)
    plain = write_dequantized(tiny, tmp_path / "plain", fmt)
    stored = start(checkpoint, tmp_path)
    assert stored.plan.quantization.value == "none"
    assert stored.plan.quantization.evidence.startswith(f"from the checkpoint's compressed-tensors {fmt} int8 "
                                                        "weights (a scale per output channel, symmetric), "
                                                        "dequantized at load to float32")
    assert greedy(stored) == greedy(start(plain, tmp_path))


@pytest.mark.parametrize("group", [32, 64])
def test_an_int4_w4a16_checkpoint_serves_the_weights_it_dequantizes_to(tiny, tmp_path, group):
    checkpoint = write_compressed(tiny, tmp_path / "w4a16", "pack-quantized", group=group)
    plain = write_dequantized(tiny, tmp_path / "plain", "pack-quantized", group=group)
    stored = start(checkpoint, tmp_path)
    quantization = stored.plan.quantization
    assert quantization.value == "none"
    assert quantization.evidence.startswith(f"from the checkpoint's compressed-tensors pack-quantized int4 weights "
                                            f"(a scale per group of {group} inputs, symmetric), dequantized at load")
    assert "int4 kernels quantize the activations to int8, which this checkpoint's W4A16 math does not" in \
        quantization.evidence
    values = load_file(str(plain / "model.safetensors"))
    for name, linear in (("model.layers.0.mlp.down_proj.weight", stored.executor.model.layers[0].mlp.down_proj),
                         ("lm_head.weight", stored.executor.model.lm_head)):
        kind = linear.kinds[0]
        assert torch.equal(to_out_in(linear.weight(kind), kind), values[name])
    assert greedy(stored) == greedy(start(plain, tmp_path))


def test_an_int8_checkpoint_loads_through_the_cli(tiny, tmp_path):
    result = generate(write_compressed(tiny, tmp_path / "int8", "pack-quantized"), tmp_path, "--json")
    assert result.code == 0, result.stdout + result.stderr
    assert "compressed-tensors pack-quantized int8" in json.loads(result.stdout)["plan"]["quantization"]["evidence"]


def with_group(config: dict, **group) -> dict:
    config["config_groups"]["group_0"] |= group
    return config


REFUSED = {
    "awq": ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
            "quantization_config quant_method=awq (AWQ int4 weights in groups with zero points) " + USE),
    "gptq": ({"quant_method": "gptq", "bits": 4}, "quant_method=gptq (GPTQ integer weights in groups)"),
    "bitsandbytes": ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quant_method=bitsandbytes"),
    "int4 groups of 96": (quantization("compressed-tensors", num_bits=4, strategy="group", group_size=96) | {
        "format": "pack-quantized"}, "int4 weights with strategy=group, group_size=96 (bringup reads a scale per "
        "channel or per group of 32, 64, 128, 256 inputs)"),
    "int8 groups": (quantization("compressed-tensors", strategy="group", group_size=128),
                    "strategy=group, group_size=128 (bringup reads a scale per channel, no groups)"),
    "int4 unpacked": (quantization("compressed-tensors", num_bits=4, strategy="group", group_size=128),
                      "format=int-quantized with int 4-bit weights"),
    "asymmetric": (quantization("compressed-tensors", symmetric=False), "symmetric=False (zero points)"),
    "static activations": (with_group(quantization("compressed-tensors"), input_activations={
        "num_bits": 8, "type": "int", "strategy": "tensor", "dynamic": False}), "static activation scales"),
    "sparse-24": (quantization("compressed-tensors") | {"sparsity_config": {"format": "sparse-24-bitmask"}},
                  "sparsity_config (format=sparse-24-bitmask: sparse weights)"),
    "kv cache": (quantization("compressed-tensors") | {"kv_cache_scheme": {"num_bits": 8, "type": "float"}},
                 "kv_cache_scheme"),
    "two groups": (quantization("compressed-tensors") | {"config_groups": {"a": {}, "b": {}}}, "2 config_groups"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_other_quantizations_are_refused_by_name_in_one_line(tiny, tmp_path, case):
    config, message = REFUSED[case]
    model = tmp_path / "q"
    write_dequantized(tiny, model, "int-quantized")  # float weights: the config alone is refused
    edit_config(model, {"quantization_config": config})
    result = generate(model, tmp_path)
    assert result.code == 2, result.stdout + result.stderr
    assert message in result.stderr and USE in result.stderr
    assert result.stderr.startswith(f"error: {model}: quantization_config ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr


def test_a_checkpoint_whose_tensors_do_not_match_its_quantization_config_is_refused(tiny, tmp_path):
    model = write_compressed(tiny, tmp_path / "fp8", "float-quantized")
    edit_config(model, {"quantization_config": quantization("compressed-tensors")})  # says int8, holds fp8
    result = generate(model, tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert "has dtype 'F8_E4M3' but config.json's quantization_config (compressed-tensors int-quantized int8" \
        in result.stderr and "stores it as I8" in result.stderr


def test_another_quantization_of_a_pre_quantized_checkpoint_is_refused(tiny, tmp_path):
    result = generate(write_compressed(tiny, tmp_path / "fp8", "float-quantized"), tmp_path, "--quantization",
                      "int8")
    assert result.code == 2 and "Traceback" not in result.stderr
    assert "--quantization int8:" in result.stderr and "is already quantized (compressed-tensors " \
        "float-quantized fp8 weights" in result.stderr and "drop --quantization" in result.stderr


def test_selftest_and_eval_compare_an_fp8_checkpoint_with_float64_of_its_own_weights(tiny, tmp_path):
    checkpoint = write_compressed(tiny, tmp_path / "fp8", "float-quantized", ignore=("lm_head",))
    where = ["--model", str(checkpoint), "--device", "cpu", "--profile", str(tmp_path / "p.yaml")]
    selftest = run_cli(["selftest", *where, "--steps", "8"])
    assert selftest.code == 0, selftest.stdout + selftest.stderr
    assert "fp8 weights vs float64 of the same fp8 weights (dequantized)" in " ".join(selftest.stdout.split())
    evaluated = run_cli(["eval", *where, "--reference", "float64", "--max-tokens", "128", "--ctx", "64"])
    assert evaluated.code == 0, evaluated.stdout + evaluated.stderr
    assert "the checkpoint's own quantized weights dequantized (it holds no unquantized ones)" in \
        " ".join(evaluated.stdout.split())


def test_nan_in_an_fp8_checkpoints_codes_is_refused_before_loading(tiny, tmp_path):
    checkpoint = write_compressed(tiny, tmp_path / "fp8", "float-quantized")
    tensors = load_file(str(checkpoint / "model.safetensors"))
    codes = tensors[DOWN].view(torch.uint8).clone()
    codes[0, 3] = 0x7F  # e4m3fn's NaN
    tensors[DOWN] = codes.view(torch.float8_e4m3fn)
    save_file(tensors, str(checkpoint / "model.safetensors"), metadata={"format": "pt"})
    result = generate(checkpoint, tmp_path)
    assert result.code == 2 and "Traceback" not in result.stderr
    assert f"tensor '{DOWN}' holds 1 NaN/Inf value(s)" in result.stderr
