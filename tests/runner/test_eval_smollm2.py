"""`bringup eval` on a real trained model (SmolLM2-135M-Instruct as a float32 directory): perplexity within 0.1 % of
transformers' over the same text and windows, and bfloat16 against the float32 run's saved reference, reported."""

from __future__ import annotations

import json

import pytest

from bringup.runner.eval.text import default_text
from tests.cli.run_cli import run_cli
from tests.real_model import smollm2_gguf, smollm2_hf_dir
from tests.runner.hf_perplexity import hf_perplexity, load_hf, text_tokens

CTX, STRIDE, TOKENS = 160, 96, 256


@pytest.fixture(scope="module")
def smollm2():
    return smollm2_hf_dir()


@pytest.fixture(scope="module")
def float32_run(smollm2, tmp_path_factory):
    work = tmp_path_factory.mktemp("smollm2-eval")
    out = work / "smollm2-f32.safetensors"
    result = run_cli(["eval", "--model", str(smollm2), "--device", "cpu", "--profile", str(work / "p.yaml"),
                      "--ctx", str(CTX), "--stride", str(STRIDE), "--max-tokens", str(TOKENS),
                      "--save-reference", str(out), "--json"])
    assert result.code == 0, result.stderr
    return json.loads(result.stdout), out, work


def test_perplexity_within_a_tenth_of_a_percent_of_transformers(smollm2, float32_run):
    data = float32_run[0]
    tokens = text_tokens(smollm2, default_text().text, TOKENS)
    expected = hf_perplexity(load_hf(smollm2), tokens, CTX, STRIDE)
    assert data["scored"] == TOKENS - 1 and data["windows"] == 2
    assert abs(data["ppl"] / expected - 1) < 1e-3, (data["ppl"], expected)


def test_bfloat16_against_the_float32_reference(smollm2, float32_run):
    _, out, work = float32_run
    result = run_cli(["eval", "--model", str(smollm2), "--device", "cpu", "--profile", str(work / "p.yaml"),
                      "--reference", str(out), "--dtype", "bfloat16", "--json"])
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    reference = data["reference"]
    print(f"SmolLM2 bfloat16 vs float32 over {data['scored']} tokens: KLD mean {reference['kld_mean']:.3g} "
          f"(p99 {reference['kld_p99']:.3g}, max {reference['kld_max']:.3g}; top-{reference['k']} lower bound), "
          f"top-1 {reference['top1_agreement']:.2%}, ppl {data['ppl']:.4f} vs {reference['reference_ppl']:.4f}")
    assert data["dtype"] == "bfloat16" and reference["reference_dtype"] == "float32"
    assert reference["kld_mean"] > 0 and reference["kld_max"] >= reference["kld_p99"] >= 0
    assert 0 < reference["top1_agreement"] <= 1


def test_float32_against_its_own_saved_reference(smollm2, float32_run):
    _, out, work = float32_run
    result = run_cli(["eval", "--model", str(smollm2), "--device", "cpu", "--profile", str(work / "p.yaml"),
                      "--reference", str(out), "--json"])
    assert result.code == 0, result.stderr
    reference = json.loads(result.stdout)["reference"]
    print(f"SmolLM2 float32 against its own reference: KLD max {reference['kld_max']:.3g}")
    assert reference["kld_max"] <= 1e-6 and reference["top1_agreement"] == 1.0  # 0 when start-up picks the same
    assert abs(reference["delta_ppl"]) <= 1e-4  # layout; else float32 rounding of another summation order


def test_the_gguf_file_against_the_directory_reference(float32_run):
    """The Q4_1 file, dequantized by bringup, scores the text as its float32 directory (dequantized by
    transformers) did: the same tokens from the file's own tokenizer, the same distributions."""
    _, out, work = float32_run
    result = run_cli(["eval", "--model", str(smollm2_gguf()), "--device", "cpu", "--profile", str(work / "p.yaml"),
                      "--reference", str(out), "--json"])
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    reference = data["reference"]
    print(f"SmolLM2 GGUF against the directory's float32 reference: KLD max {reference['kld_max']:.3g}, "
          f"ppl {data['ppl']:.4f} vs {reference['reference_ppl']:.4f}")
    assert reference["kld_max"] <= 1e-6 and reference["top1_agreement"] == 1.0
    assert abs(reference["delta_ppl"]) <= 1e-4
