"""A tune record is keyed by the weights' content, not only their names and sizes (issue 38): the record tuned for
one tiny model directory is not replayed onto other weights of the same size, and still is onto its own."""

from __future__ import annotations

import shutil

import pytest

from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli
from tests.runner.hf_fixtures import make_hf_model


@pytest.fixture(scope="module")
def tuned_dir(tmp_path_factory):
    """A tiny Llama directory, a profile holding its tuned plan, and a second directory: the same config and
    tokenizer, weights of another seed in a file of the same size."""
    folder = tmp_path_factory.mktemp("keyed")
    make_hf_model(folder / "tiny", seed=0)
    make_hf_model(folder / "other-weights", seed=1)
    swapped = folder / "swapped" / "tiny"  # the same directory name: the same model name in the key
    shutil.copytree(folder / "tiny", swapped)
    shutil.copy(folder / "other-weights" / "model.safetensors", swapped / "model.safetensors")
    profile = folder / "p.yaml"
    result = run_cli(["tune", "--model", str(folder / "tiny"), "--device", "cpu", "--profile", str(profile),
                      "--runs", "2", "--max-model-len", "128"])
    assert result.code == 0, result.stderr
    return folder / "tiny", swapped, profile


def generate_logs(model, profile) -> str:
    result = run_cli(["generate", "Hi", "--model", str(model), "--device", "cpu", "--profile", str(profile),
                      "--max-tokens", "2", "--max-model-len", "128", "-v"])
    assert result.code == 0, result.stderr
    return " ".join((result.stdout + result.stderr).split())


@pytest.mark.slow
def test_a_record_is_not_replayed_onto_other_weights_of_the_same_size(tuned_dir):
    tiny, swapped, profile = tuned_dir
    assert (tiny / "model.safetensors").stat().st_size == (swapped / "model.safetensors").stat().st_size
    assert (tiny / "model.safetensors").read_bytes() != (swapped / "model.safetensors").read_bytes()
    (key,) = load_profile(profile).models
    assert "replayed, no timing" in generate_logs(tiny, profile)  # its own weights: replayed
    other = generate_logs(swapped, profile)
    assert "replayed, no timing" not in other
    assert "no plan recorded for tiny [" in other and f"no plan recorded for {key}" not in other
