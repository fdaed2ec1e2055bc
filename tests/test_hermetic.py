"""The suite is hermetic: a hostile profile and hostile caches where it starts change nothing.

The starting directory gets a profile for this CPU that every engine reading it refuses (it marks every
attention path failed) and that would steer a plan to bfloat16; `$HOME` and the cache variables point at
folders with planted files, and BRINGUP_DEVICE names a device that does not exist. A real pytest run of
tests that start engines, write default profiles and build kernels must pass there and leave every file
exactly as it was.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.backends.registry import device_info
from bringup.errors import BringupError
from bringup.profiles.schema import Capabilities, Capability
from bringup.profiles.sections.bench import BenchSection, MeasuredCeilings
from bringup.profiles.store import default_profile_path, update_profile
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from tests.runner.test_plan_fallbacks import _op

REPO = Path(__file__).resolve().parents[1]
INNER_TESTS = [
    "tests/cli/test_default_paths.py",  # commands that read and write ./profiles by default
    "tests/runner/test_paged_decode.py",  # the engines that once planned from ./profiles and crashed
    "tests/cli/test_bad_input.py",
]


def plant_hostile_profile(start: Path) -> Path:
    failed = Capability(status="unsupported", reason="planted by the hermetic test")
    caps = Capabilities(dtypes={"bfloat16": Capability(status="supported", evidence="planted")},
                        attention={name: failed for name in ("sdpa_flash", "sdpa_efficient", "sdpa_math")})

    def hostile(profile):
        profile.capabilities = caps
        profile.ops = [_op(op, dtype, "fail") for op in ("matmul", "bmm", "softmax") for dtype in
                       ("float32", "bfloat16")]
        profile.bench = BenchSection(ceilings=MeasuredCeilings(tflops={"bfloat16": 1e3, "float32": 1e-3}))

    path = start / default_profile_path(device_info("cpu")).relative_to(Path.cwd())  # where `./profiles` puts it
    update_profile(path, device_info("cpu"), hostile, stage="probe", status="complete", force=True)
    return path


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


def test_the_planted_profile_is_hostile_to_an_engine_that_reads_it(tmp_path, monkeypatch):
    plant_hostile_profile(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(BringupError, match="every attention path failed"):
        LLMEngine.create(EngineOptions(device="cpu", max_model_len=32))


@pytest.mark.slow
def test_a_hostile_starting_directory_and_home_change_nothing(tmp_path):
    start, home = tmp_path / "start", tmp_path / "home"
    planted = plant_hostile_profile(start)
    for cache in ("kernels", "inductor", ".cache/bringup/kernels"):
        (home / cache).mkdir(parents=True)
        (home / cache / "planted.so").write_bytes(b"not a library")
    before = {"start": snapshot(start), "home": snapshot(home)}
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
           "BRINGUP_KERNEL_CACHE": str(home / "kernels"), "TORCHINDUCTOR_CACHE_DIR": str(home / "inductor"),
           "BRINGUP_DEVICE": "cuda:7"}
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner"),
         "-k", "not torch_compile", *(str(REPO / t) for t in INNER_TESTS)],
        cwd=start, env=env, capture_output=True, text=True, timeout=600)
    assert inner.returncode == 0, inner.stdout[-3000:] + inner.stderr[-2000:]
    assert " passed" in inner.stdout.splitlines()[-1]
    assert {"start": snapshot(start), "home": snapshot(home)} == before
    assert planted.is_file()
