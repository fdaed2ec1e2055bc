"""The torch floor: the tested release is one constant, older torches are warned about in one line, and the
install page and the set-up script say the same release."""

import re
from pathlib import Path

import pytest
import torch

from bringup.cli.torch_floor import CLAIMED_FLOOR, TESTED_TORCH, release_of, untested_torch_warning
from tests.cli.run_cli import run_cli

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("version", ["2.13.0", "2.13.0+cpu", "2.13.1+cu128", "2.14.0.dev20261201+cpu", "3.0.0",
                                     "10.0.0"])
def test_the_tested_release_and_newer_are_not_warned_about(version):
    assert untested_torch_warning(version) is None


@pytest.mark.parametrize("version", ["2.4.0", "2.4.1+cu121", "2.6.0a0+git1234abc", "2.9.1+rocm6.4", "2.12.1+xpu",
                                     "2.12.0.dev20260101"])
def test_a_claimed_but_untested_release_warns_in_one_line(version):
    warning = untested_torch_warning(version)
    assert warning is not None and "\n" not in warning
    assert warning.startswith(f"torch {version} is older than {TESTED_TORCH}")
    assert f"torch>={CLAIMED_FLOOR} is claimed, not tested" in warning


def test_a_release_below_the_claimed_floor_says_so():
    warning = untested_torch_warning("2.3.0a0+ebedce2")  # an NVIDIA container's build of 2.3
    assert warning is not None and f"below the floor torch>={CLAIMED_FLOOR}" in warning


def test_releases_compare_as_numbers_not_text():
    assert release_of("2.4.1+cu121") == (2, 4) and release_of("2.13.0+cpu") == (2, 13)
    assert release_of("2.9.0") < release_of("2.13.0") < release_of("10.0")  # "2.9" > "2.13" as text


def test_a_version_that_names_no_release_is_not_taken_as_tested():
    warning = untested_torch_warning("unknown")
    assert warning is not None and "not a version number" in warning


def test_the_suite_runs_on_the_tested_release():
    assert release_of(torch.__version__) == release_of(TESTED_TORCH)


def test_pyproject_docs_and_setup_script_agree_with_the_constants():
    assert f'"torch>={CLAIMED_FLOOR}"' in (ROOT / "pyproject.toml").read_text()
    assert re.search(rf'torch=={re.escape(TESTED_TORCH)}\.\d+', (ROOT / "scripts" / "setup-venv.sh").read_text())
    install = (ROOT / "docs" / "install.md").read_text()
    assert f"| {TESTED_TORCH} (`torch=={TESTED_TORCH}.0`" in install and "**claimed, not tested**" in install
    assert "TESTED_TORCH" in install and "bringup/cli/torch_floor.py" in install


@pytest.mark.parametrize("command", [["env"], ["devices", "--device", "cpu", "--no-write"]])
def test_env_and_devices_warn_on_an_older_torch_and_not_on_this_one(command, monkeypatch):
    quiet = run_cli(command)
    assert quiet.code == 0, quiet.stderr[-2000:]
    assert "older than" not in quiet.stderr + quiet.stdout
    monkeypatch.setattr(torch, "__version__", "2.4.1+cu121")  # the version string a vendor's 2.4 build reports
    warned = run_cli(command)
    assert warned.code == 0, warned.stderr[-2000:]
    lines = [line for line in warned.stderr.splitlines() if "older than" in line]
    assert len(lines) == 1 and f"torch 2.4.1+cu121 is older than {TESTED_TORCH}" in lines[0]
