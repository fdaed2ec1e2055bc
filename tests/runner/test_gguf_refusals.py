"""A GGUF file bringup cannot serve is refused through the real CLI in one line naming what is wrong, exit 2,
before any weight is used: an unsupported tensor type, an unknown architecture, a tokenizer model bringup does not
build ('t5'), an unknown text split, a missing tensor, an oversized chat template, NaN weights in each tensor type
(loaded with --force), a truncated or garbage file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from tests.cli.run_cli import run_cli
from tests.runner.gguf_files import NO_PRE, T, mixed_types, write_gguf
from tests.runner.hf_fixtures import make_hf_model

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[torch.nn.Module, Path, Path]:
    """A tiny llama (intermediate 256, so a row of down_proj is one 256-value block), its tokenizer, a valid file."""
    where = tmp_path_factory.mktemp("tiny")
    hf = make_hf_model(where / "hf", "llama", tied=True, intermediate=256)
    return hf, where / "hf", write_gguf(where / "good.gguf", hf, where / "hf", "llama")


def generate(tmp_path: Path, model: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_cli(["generate", "Hi", "--model", str(model), "--device", "cpu", "--max-tokens", "2",
                    "--profile", str(tmp_path / "p.yaml"), *extra])


def assert_refused(result, *words: str) -> None:  # type: ignore[no-untyped-def]
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ")
    for word in words:
        assert word in lines[-1], lines[-1]


def test_a_valid_tiny_file_generates(tmp_path, tiny):
    result = generate(tmp_path, tiny[2], "--json")
    assert result.code == 0, result.stderr


def test_an_unsupported_tensor_type_is_named(tmp_path, tiny):
    hf, tokenizer, _ = tiny

    def iq2_xxs_down(name: str, tensor: torch.Tensor) -> object:
        return T.IQ2_XXS if name == "blk.1.ffn_down.weight" else mixed_types(name, tensor)

    path = write_gguf(tmp_path / "iq2.gguf", hf, tokenizer, "llama", iq2_xxs_down)
    assert_refused(generate(tmp_path, path), "blk.1.ffn_down.weight", "IQ2_XXS", "Q4_1", "Q6_K")


@pytest.mark.parametrize(("option", "value", "words"), [
    ("written_arch", "falcon", ("architecture 'falcon'", "llama, qwen2, qwen3")),
    ("tokenizer_model", "t5", ("tokenizer is 't5'", "SentencePiece ('llama')")),
    ("pre", "mystery-split", ("tokenizer.ggml.pre", "mystery-split")),
    ("skip", ("blk.0.ffn_up.weight",), ("model.layers.0.mlp.up_proj.weight", "missing from the GGUF file")),
    ("texts", {"tokenizer.chat_template.huge": "x" * (4 * 2**20 + 1)}, ("tokenizer.chat_template.huge", "more than")),
])
def test_what_the_file_says_is_refused_by_name(tmp_path, tiny, option, value, words):
    hf, tokenizer, _ = tiny
    path = write_gguf(tmp_path / "bad.gguf", hf, tokenizer, "llama", **{option: value})
    assert_refused(generate(tmp_path, path), str(path), *words)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # gguf quantizing the NaN
@pytest.mark.parametrize(("kind", "count"), [("F16", 1), ("BF16", 1), ("Q8_0", 32), ("Q4_0", 32), ("Q4_1", 32)])
def test_nan_weights_are_refused_unless_forced(tmp_path, kind, count):
    """One NaN: a float tensor holds one; a quantized block's scale becomes NaN, so all 32 values of the block are."""
    broken = make_hf_model(tmp_path / "hf", "llama", tied=True, intermediate=256)
    with torch.no_grad():
        broken.model.layers[1].mlp.up_proj.weight[3, 5] = float("nan")

    def nan_tensor_in(name: str, tensor: torch.Tensor) -> object:
        return getattr(T, kind) if name == "blk.1.ffn_up.weight" else mixed_types(name, tensor)

    path = write_gguf(tmp_path / "nan.gguf", broken, tmp_path / "hf", "llama", nan_tensor_in)
    assert_refused(generate(tmp_path, path), "model.layers.1.mlp.up_proj.weight", f"holds {count} NaN/Inf", "--force")
    forced = generate(tmp_path, path, "--force")  # loaded (a WARNING); the engine then refuses its NaN logits
    logged = " ".join(forced.stderr.split())  # the log handler wraps long lines
    assert f"'model.layers.1.mlp.up_proj.weight' with {count} NaN/Inf value(s) because of --force" in logged
    assert_refused(forced, "logits with NaN")


@pytest.mark.parametrize("keep", [0.6, 0.002])
def test_a_truncated_file_is_one_line(tmp_path, tiny, keep):
    path = tmp_path / "cut.gguf"
    data = tiny[2].read_bytes()
    path.write_bytes(data[:int(len(data) * keep)])
    assert_refused(generate(tmp_path, path), str(path), "truncated or corrupt")


def test_garbage_and_missing_files_are_one_line(tmp_path, tiny):
    garbage = tmp_path / "noise.gguf"
    garbage.write_bytes(bytes(range(256)) * 4)
    assert_refused(generate(tmp_path, garbage), "is not a GGUF file")
    assert_refused(generate(tmp_path, tmp_path / "absent.gguf"), "does not exist")
    renamed = tmp_path / "model.bin"
    shutil.copy(tiny[2], renamed)
    assert_refused(generate(tmp_path, renamed), "is a file", ".gguf")


def test_a_file_without_its_text_split_falls_back_to_gpt2s_counted_and_refused_by_strict(tmp_path, tiny):
    hf, tokenizer, _ = tiny
    path = write_gguf(tmp_path / "no-pre.gguf", hf, tokenizer, "llama", pre=NO_PRE)
    result = generate(tmp_path, path, "--json")
    assert result.code == 0, result.stderr
    assert "no tokenizer.ggml.pre" in result.stderr and "GPT-2's split" in result.stderr
    assert json.loads(result.stdout)["fallbacks"]["counts"]["op"] == 1
    assert_refused(generate(tmp_path, path, "--strict"), "no tokenizer.ggml.pre", "--strict")
