"""Eager vs compiled: a deliberately mis-compiling backend is a mismatch, bisected to its rung."""

import json
from pathlib import Path

from bringup.probes.ops.catalog import PLUGINS_ENV
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli
from tests.probes.ops.conftest import PLUGIN
from tests.probes.ops.faulty_ops import PERTURB_BACKEND
from tests.runner.host_compiler import needs_compiler_for_inductor


def test_perturbing_backend_on_the_runners_layer_is_a_mismatch_and_the_ladder_names_it(tmp_path, monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, PLUGIN)
    import tests.probes.ops.faulty_ops  # noqa: F401  registers the backend in this (in-process) run

    result = run_cli(["verify-ops", "--no-isolate", "--json", "--compiled", "--compile-backend", PERTURB_BACKEND,
                      "--op", "runner_decoder_layer", "--dtype", "float32", "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 1, result.stderr
    (rec,) = json.loads(result.stdout)["compiled"]
    assert rec["status"] == "mismatch" and rec["failing_backend"] == PERTURB_BACKEND
    assert list(rec["ladder"]) == ["eager", "aot_eager", "aot_eager_decomp_partition", PERTURB_BACKEND]
    assert [rec["ladder"][r] for r in ("eager", "aot_eager", "aot_eager_decomp_partition")] == ["pass"] * 3
    assert rec["compiled_err"] > rec["allowed"] > rec["eager_err"]
    assert rec["compile_s"] > 0 and rec["speedup"] > 0
    stored = load_profile(tmp_path / "p.yaml").compiled
    assert [(r.target, r.status, r.failing_backend) for r in stored] == [
        ("runner_decoder_layer", "mismatch", PERTURB_BACKEND)]


@needs_compiler_for_inductor
def test_inductor_block_passes_with_one_cache_dir(tmp_path, inductor_cache_dir):
    cache = Path(inductor_cache_dir)
    result = run_cli(["verify-ops", "--no-isolate", "--json", "--compiled", "--op", "rotary_attention",
                      "--dtype", "float32", "--profile", str(tmp_path / "p.yaml"), "--compile-cache", str(cache)])
    assert result.code == 0, result.stderr
    (rec,) = json.loads(result.stdout)["compiled"]
    assert rec["status"] == "pass" and rec["backend"] == "inductor", rec
    assert rec["compiled_err"] <= rec["allowed"] and rec["compile_s"] > 0 and rec["speedup"] > 0
    assert any(p.is_file() for p in cache.rglob("*")), "inductor wrote nothing into the run's cache dir"
