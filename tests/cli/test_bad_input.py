"""Every user mistake ends in one line on stderr, exit code 2, no traceback."""

import subprocess
import sys

import pytest

from bringup.backends.base import DeviceInfo
from bringup.profiles.store import update_profile
from tests.cli.run_cli import run_cli


def assert_one_line_error(result, *fragments: str) -> None:
    assert result.code == 2, (result.code, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith(("WARNING", " "))]
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def test_unknown_device_string(tmp_path):
    result = run_cli(["devices", "--device", "gpu7", "--profile", str(tmp_path / "p.yaml")])
    assert_one_line_error(result, "not a device torch knows", "usable here: cpu")


def test_device_index_out_of_range(tmp_path):
    result = run_cli(["probe", "--device", "cpu:4", "--profile", str(tmp_path / "p.yaml")])
    assert_one_line_error(result, "index 4 is out of range", "usable here: cpu")


def test_malformed_yaml(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("schema: bringup.profile/v1\ndevice: {id: cpu\n")
    assert_one_line_error(run_cli(["profile", "validate", str(bad)]), "not valid YAML")
    assert_one_line_error(run_cli(["probe", "--only", "memory", "--profile", str(bad)]), "not valid YAML")


def test_profile_with_wrong_types(tmp_path):
    bad = tmp_path / "p.yaml"
    bad.write_text("schema: bringup.profile/v1\ncapabilities: {dtypes: {float32: {status: 3}}}\n")
    assert_one_line_error(run_cli(["profile", "show", str(bad)]), "capabilities.dtypes.float32.status")


def test_profile_for_another_device(tmp_path):
    path = tmp_path / "gpu.yaml"
    gpu = DeviceInfo(id="cuda:0", backend="cuda", name="Some GPU")
    update_profile(path, gpu, lambda p: None, stage="devices", status="complete")
    before = path.read_bytes()
    result = run_cli(["probe", "--device", "cpu", "--only", "memory", "--profile", str(path)])
    assert_one_line_error(result, "recorded for cuda:0", "--force")
    assert path.read_bytes() == before


def test_unwritable_profile_path(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_cli(["devices", "--profile", str(blocker / "p.yaml")])
    assert_one_line_error(result, "cannot write profile", "writable --profile")


def test_missing_profile_file(tmp_path):
    assert_one_line_error(run_cli(["profile", "show", str(tmp_path / "none.yaml")]), "does not exist")


def test_unknown_probe_check(tmp_path):
    result = run_cli(["probe", "--only", "warp-drive", "--profile", str(tmp_path / "p.yaml")])
    assert_one_line_error(result, "unknown probe check 'warp-drive'")


@pytest.mark.parametrize("args", [["devices", "--device", "nope"], ["profile", "validate", "/nonexistent.yaml"]])
def test_real_process_exit_code_and_single_line(args, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bringup", *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert sum(line.startswith("error:") for line in proc.stderr.splitlines()) == 1
