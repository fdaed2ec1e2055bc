"""Backends as plugins: a real package (plugin_pkg/) installed with pip into a temporary folder registers the
`fakecpu` family through the `bringup.backends` entry-point group; the real CLI, in a subprocess with that folder
on PYTHONPATH, lists it, verifies its attention implementations, and runs the verified one."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.backends.registry import BUILTIN, ENTRY_POINT_GROUP, all_backends, declared

REPO = Path(__file__).resolve().parents[2]
PLUGIN_SOURCE = Path(__file__).with_name("plugin_pkg")


def run(args: list[str], site: Path | None, cwd: Path, timeout: int = 240) -> subprocess.CompletedProcess:
    path = [str(site)] if site else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(REPO)])}
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bringup-fakecpu installed (pip, no network) into a fresh target folder; built from a copy of its
    source so the build leaves nothing in the repository."""
    base = tmp_path_factory.mktemp("plugin")
    source, site = base / "source", base / "site"
    shutil.copytree(PLUGIN_SOURCE, source)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--no-index", "--disable-pip-version-check", "--target", str(site), str(source)],
                   check=True, capture_output=True, timeout=240)
    return site


def bringup(args: list[str], site: Path | None, cwd: Path) -> subprocess.CompletedProcess:
    return run(["-m", "bringup", *args], site, cwd)


def test_devices_lists_the_plugin_family_before_the_host(plugin_site, tmp_path):
    done = bringup(["devices", "--json", "--profile", str(tmp_path / "p.yaml")], plugin_site, tmp_path)
    assert done.returncode == 0, done.stderr
    families = {f["family"]: f for f in json.loads(done.stdout)["torch"]}
    assert list(families)[-2:] == ["fakecpu", "cpu"]
    (device,) = families["fakecpu"]["devices"]
    assert families["fakecpu"]["usable"] and device["id"] == "cpu" and device["backend"] == "cpu"
    assert "host CPU under another family name" in device["extra"]["plugin"]


def test_without_the_plugin_the_family_is_absent(tmp_path):
    done = bringup(["devices", "--json", "--profile", str(tmp_path / "p.yaml")], None, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "fakecpu" not in [f["family"] for f in json.loads(done.stdout)["torch"]]


def test_probe_verifies_plugin_attention_and_the_runner_uses_only_the_verified_one(plugin_site, tmp_path):
    profile = tmp_path / "p.yaml"
    probe = bringup(["probe", "--device", "cpu", "--only", "attention", "--json", "--profile", str(profile)],
                    plugin_site, tmp_path)
    assert probe.returncode == 0, probe.stderr
    attention = yaml.safe_load(profile.read_text())["capabilities"]["attention"]
    good, broken = attention["fakecpu_attention"], attention["fakecpu_broken"]
    assert good["status"] == "supported" and good["details"]["supplied_by"] == "fakecpu"
    assert set(good["details"]["dtypes"].values()) == {"pass"}
    assert broken["status"] == "unsupported" and "tolerance" in broken["reason"]  # the dropped mask is caught
    assert attention["sdpa_math"]["status"] == "supported"  # the built-in checks still run beside the plugin's
    selftest = bringup(["selftest", "--steps", "2", "--strict", "--json", "--profile", str(profile)],
                       plugin_site, tmp_path)
    assert selftest.returncode == 0, selftest.stderr
    result = json.loads(selftest.stdout)
    assert result["status"] == "pass" and result["attention"].endswith("fakecpu_attention")  # after any decode kernel
    assert result["fallbacks"] == {"op": 0, "path": 0, "global": 0}  # --strict: it ran, nothing fell back


def test_plugin_peaks_are_searched_before_the_bundled_table(plugin_site, tmp_path):
    code = ("from bringup.probes.bench.roofline import datasheet_for; "
            "print(datasheet_for('FakeCPU FC-1')[0].id, datasheet_for('NVIDIA H100 PCIe')[0].id)")
    done = run(["-c", code], plugin_site, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["fakecpu-fc1", "nvidia-h100-pcie"]
    without = "from bringup.probes.bench.roofline import datasheet_for; print(datasheet_for('FakeCPU FC-1')[1])"
    alone = run(["-c", without], None, tmp_path)
    assert alone.returncode == 0 and "no datasheet entry matches 'FakeCPU FC-1'" in alone.stdout


def test_builtins_come_from_the_installed_distributions_entry_points(plugin_site, tmp_path):
    """An installed bringup's declarations are read and win where they name a family; a built-in family it does
    not declare (an install older than that family) still comes from BUILTIN. Each is listed once, in BUILTIN's
    order, the plugin after them, the generic PrivateUse1 backend and the host last."""
    site = tmp_path / "site"
    shutil.copytree(plugin_site, site)
    dist = site / "bringup-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bringup\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ncpu = bringup.backends.cpu:CpuBackend\n"
                                           "mps = bringup_fakecpu.backend:FakeCpuBackend\n")
    code = "import json; from bringup.backends.registry import declared; print(json.dumps(list(declared().items())))"
    done = run(["-c", code], site, tmp_path)
    assert done.returncode == 0, done.stderr
    found = dict(json.loads(done.stdout))
    assert found["mps"] == "bringup_fakecpu.backend:FakeCpuBackend"  # the installed declaration wins
    assert found["cuda"] == BUILTIN["cuda"] and found["fakecpu"] == "bringup_fakecpu.backend:FakeCpuBackend"
    builtins = [name for name in BUILTIN if name not in ("privateuse1", "cpu")]
    assert list(found) == [*builtins, "fakecpu", "privateuse1", "cpu"]


def test_a_plugin_that_cannot_load_is_named_and_left_out(tmp_path):
    dist = tmp_path / "site" / "bringup_broken-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bringup-broken\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nbroken = bringup_no_such_module:Backend\n")
    done = bringup(["devices", "--json", "--profile", str(tmp_path / "p.yaml")], tmp_path / "site", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "cpu" in [f["family"] for f in json.loads(done.stdout)["torch"]]
    assert "backend 'broken' (bringup_no_such_module:Backend) could not be loaded" in " ".join(done.stderr.split())


def test_pyproject_declares_exactly_the_builtin_list():
    """The two places the built-ins are named (the entry points an install reads, the list a source tree
    falls back on) say the same, in the same order."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["entry-points"][ENTRY_POINT_GROUP] == BUILTIN
    assert list(pyproject["project"]["entry-points"][ENTRY_POINT_GROUP]) == list(BUILTIN)


def test_builtins_registered_once_in_this_process():
    names = list(declared())
    assert len(names) == len(set(names)) and set(BUILTIN) <= set(names) and names[-1] == "cpu"
    families = [b.family for b in all_backends()]
    assert len(families) == len(set(families)) and families[-1] == "cpu"


ACME_PLUGIN = '''
import torch

from bringup.backends.privateuse1 import PrivateUse1Backend

torch.utils.rename_privateuse1_backend("acme")


def acme_attention(*args, **kwargs):
    raise NotImplementedError


class AcmeBackend(PrivateUse1Backend):
    """A vendor's extension that renames PrivateUse1, with facts and an attention kernel of its own."""

    smi_tools = ("acme-smi",)

    def __init__(self) -> None:
        super().__init__("acme")

    def attention_implementations(self):
        return {"acme_attention": acme_attention}
'''


def test_a_plugin_for_a_renamed_privateuse1_device_wins_over_the_generic_backend(tmp_path):
    """The generic PrivateUse1 backend takes whatever name an extension gave that device; a plugin declaring the
    same family is the one used (its device queries, its attention), not shadowed by the catch-all."""
    site = tmp_path / "site"
    dist = site / "bringup_acme-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (site / "acme_plugin.py").write_text(ACME_PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: bringup-acme\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\nacme = acme_plugin:AcmeBackend\n")
    code = ("import acme_plugin\nfrom bringup.backends.registry import all_backends, attention_implementations\n"
            "print([type(b).__name__ for b in all_backends() if b.family == 'acme'], "
            "sorted(attention_implementations('acme')))")
    done = run(["-c", code], site, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['AcmeBackend'] ['acme_attention']"
