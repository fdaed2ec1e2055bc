"""Every profile recorded on a real machine (reference/profiles/) exports for both engines, and the document validates
against the published schema; the export reads neither torch nor the runner's torch modules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bringup.export import ENGINE_NAMES, export_config
from bringup.export.render import shell_line, text_lines, to_document
from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile
from tests.json_schemas import assert_valid

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"
PROFILES = sorted(REFERENCE.glob("*.yaml"))


@pytest.fixture(scope="module", params=PROFILES, ids=[p.stem for p in PROFILES])
def profile(request):
    return load_profile(request.param)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_each_reference_profile_exports_a_valid_explained_configuration(profile, engine):
    config = export_config(profile, engine)
    assert config.argv and config.engine_version
    assert all(s.reason for s in config.settings) and all(o.reason for o in config.omitted)
    assert {s.name for s in config.settings}.isdisjoint(o.name for o in config.omitted)
    assert_valid({"schema": "bringup.export/v1", "profile": "reference.yaml", **to_document(config)})
    assert shell_line(config) in "\n".join(text_lines(config))


def test_the_host_references_are_compiled_and_bound_to_every_core():
    for path in PROFILES:
        found = load_profile(path)
        if found.device.is_accelerator:
            continue
        config = export_config(found, "vllm")
        assert "--enforce-eager" not in config.argv, path.name  # inductor passed; graphs do not apply on the host
        assert config.environment == {"VLLM_CPU_OMP_THREADS_BIND": "0-1"}, path.name
        assert export_config(found, "llama.cpp").setting("-ngl").value == "0"


SCRIPT = """
import sys
from pathlib import Path
from bringup.export import export_config
from bringup.export.render import text_lines
from bringup.profiles.store import load_profile
for engine in ("vllm", "llama.cpp"):
    text_lines(export_config(load_profile(Path(sys.argv[1])), engine))
heavy = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
runner = sorted(m for m in sys.modules if m.startswith("bringup.runner"))
print("HEAVY:" + ",".join(heavy))
print("RUNNER:" + ",".join(runner))
"""


def test_export_imports_neither_torch_nor_the_runners_torch_modules():
    from tests.report.test_torch_free import TORCH_FREE_RUNNER

    done = subprocess.run([sys.executable, "-c", SCRIPT, str(PROFILES[0])], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "HEAVY:\n" in done.stdout, done.stdout
    runner = done.stdout.split("RUNNER:")[1].split("\n")[0].split(",")
    assert set(runner) <= TORCH_FREE_RUNNER, sorted(set(runner) - TORCH_FREE_RUNNER)


def test_a_profile_with_no_evidence_sets_only_the_conservative_flags():
    vllm = export_config(Profile(), "vllm")
    assert [s.name for s in vllm.settings] == ["--enforce-eager", "--tensor-parallel-size"]
    assert all(o.reason for o in vllm.omitted)
    assert export_config(Profile(), "llama.cpp").settings == ()
