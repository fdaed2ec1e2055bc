import json

from bringup.profiles.store import load_profile
from tests.backends.sysfs import intel_igpu_nvidia_dgpu
from tests.cli.run_cli import run_cli


def test_devices_json_shows_this_cpu_and_records_profile(tmp_path):
    path = tmp_path / "p.yaml"
    result = run_cli(["devices", "--json", "--profile", str(path)])
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    cpu_family = next(f for f in data["torch"] if f["family"] == "cpu")
    (cpu,) = cpu_family["devices"]
    assert cpu["extra"]["isa_level"] and cpu["extra"]["logical_cores"] >= 1 and cpu["memory_total_bytes"] > 0
    assert data["selected"]["id"] in [d["id"] for f in data["torch"] for d in f["devices"]]
    assert data["selected"]["reason"]
    profile = load_profile(path)
    assert profile.device.id == data["selected"]["id"] and profile.environment.torch
    assert profile.stages["devices"].status == "complete"


def test_devices_with_fixture_tree_lists_unusable_nvidia(tmp_path):
    root = intel_igpu_nvidia_dgpu(tmp_path / "root")
    result = run_cli(["devices", "--json", "--no-write", "--system-root", str(root)])
    assert result.code == 0, result.stderr
    devices = {d["pci"]["address"]: d for d in json.loads(result.stdout)["system"]["devices"]}
    nvidia = devices["0000:01:00.0"]
    assert nvidia["pci"]["vendor"] == "NVIDIA" and nvidia["usable"] is False and nvidia["reason"]
    table = run_cli(["devices", "--no-write", "--system-root", str(root)])
    assert "NVIDIA" in table.stdout and "not usable" in table.stdout
