"""Two of issue 38's small cases through the real CLI: a context that does not fit says so, what fits and what to
do (it printed "-1631843 KV blocks fit"); `selftest --force` on NaN weights does what --force says (it refused
while suggesting --force): it runs, and records the run as failed, naming the NaN, with no NaN in the profile."""

from __future__ import annotations

import json
import math
import re

import pytest

from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli
from tests.runner.hf_fixtures import make_hf_model


@pytest.fixture(scope="module")
def long_context(tmp_path_factory):
    """A tiny Llama whose config allows 10 million positions."""
    path = tmp_path_factory.mktemp("long-context")
    make_hf_model(path)
    config = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 10_000_000}))
    return path


@pytest.mark.slow
def test_a_context_that_does_not_fit_says_what_fits(long_context, tmp_path):
    asked = 1_000_000  # its float32 attention scores alone would need 32 TB
    result = run_cli(["generate", "Hi", "--model", str(long_context), "--device", "cpu", "--max-tokens", "2",
                      "--profile", str(tmp_path / "p.yaml"), "--max-model-len", str(asked)])
    assert result.code == 2 and "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert f"a {asked}-token context does not fit in device memory" in line
    assert not re.search(r"-\d", line), line  # no negative count of blocks
    fits = re.search(r"at most (\d+) tokens fit: pass --max-model-len (\d+) or less, or free device memory", line)
    assert fits and fits[1] == fits[2] and 2 <= int(fits[1]) < asked, line


@pytest.fixture(scope="module")
def nan_model(tmp_path_factory):
    from safetensors.torch import load_file, save_file

    path = tmp_path_factory.mktemp("nan-model")
    make_hf_model(path)
    weights = path / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["model.layers.1.mlp.down_proj.weight"][0, 0] = float("nan")
    save_file(tensors, str(weights), metadata={"format": "pt"})
    return path


def test_selftest_refuses_nan_weights_and_says_force_loads_them(nan_model, tmp_path):
    result = run_cli(["selftest", "--model", str(nan_model), "--device", "cpu", "--profile", str(tmp_path / "p.yaml"),
                      "--steps", "2"])
    assert result.code == 2 and "Traceback" not in result.stderr
    assert "holds 1 NaN/Inf value(s)" in result.stderr and "pass --force to load them anyway" in result.stderr


@pytest.mark.slow
def test_selftest_force_runs_on_nan_weights_and_records_a_failure(nan_model, tmp_path):
    profile = tmp_path / "p.yaml"
    result = run_cli(["selftest", "--model", str(nan_model), "--device", "cpu", "--profile", str(profile),
                      "--steps", "2", "--force"])
    assert result.code == 1, result.stderr  # ran, and failed: a finding, not refused input
    assert "Traceback" not in result.stdout + result.stderr and "pass --force" not in result.stderr
    section = load_profile(profile).selftest
    assert section.status == "fail" and "NaN/Inf on the device or in the float64 reference" in section.reason
    assert "loaded with --force" in section.reason
    figures = (section.max_abs_err, section.reference_rms, section.threshold, section.top1_agreement)
    assert all(math.isfinite(x) for x in figures), figures
