"""Commands run without --profile use ./profiles of the test's own directory; caches and $HOME are the run's."""

from __future__ import annotations

import json
import os
from pathlib import Path

from bringup.backends.registry import device_info
from bringup.profiles.store import default_profile_path, load_profile
from bringup.runner.weights.kernels import build as host_build
from tests.cli.run_cli import run_cli
from tests.conftest import RUN_DIR


def test_generate_without_a_profile_looks_in_the_working_directory_and_plans_conservatively():
    result = run_cli(["generate", "Hi", "--max-tokens", "2", "--device", "cpu", "--json", "--max-model-len", "32"])
    assert result.code == 0, result.stderr[-1500:]
    plan = json.loads(result.stdout)["plan"]
    assert plan["dtype"]["value"] == "float32" and plan["attention"]["value"][-1] == "matmul_softmax"
    assert str(default_profile_path(device_info("cpu"))) in plan["profile"]  # "... does not exist"


def test_verify_ops_without_a_profile_writes_it_under_the_working_directory():
    result = run_cli(["verify-ops", "--no-isolate", "--json", "--dtype", "float32", "--op", "relu", "-k", "odd"])
    assert result.code == 0, result.stderr[-1500:]
    written = default_profile_path(device_info("cpu"))
    assert written.parent == Path.cwd() / "profiles"
    assert {r.op for r in load_profile(written).ops} == {"relu"}


def test_home_and_every_cache_are_inside_this_runs_temporary_folder():
    for path in (Path.home(), host_build.cache_dir(), Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]),
                 Path(os.environ["HF_HOME"])):
        assert path.is_relative_to(RUN_DIR), path
    assert not Path.cwd().is_relative_to(Path(__file__).resolve().parents[2])  # not the checkout
