"""`python -m bringup_emu build` and `info`: where the library is, and the spec in force."""

import json
import subprocess
import sys

from tests.emulator.emu_process import emu_env


def run_module(*args: str, spec: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bringup_emu", *args], env=emu_env(spec), capture_output=True,
                          text=True, timeout=300, check=False)


def test_build_says_where_the_library_is_and_that_it_is_built() -> None:
    done = run_module("build")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("bringup-emu: already built: ") and done.stdout.strip().endswith(".so")


def test_info_reports_the_spec_in_force_and_the_build() -> None:
    done = run_module("info", "--json", spec='{"devices": [{"name": "one", "integrated": true, "memory": "1GiB"}]}')
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["spec"]["devices"] == [{"name": "one", "integrated": True, "memory": 1 << 30, "graphs": True,
                                        "speed": 1.0, "host_threads": None, "fail_after_ops": None,
                                        "lost_when": None}]  # the defaults
                                        # in force, written out
    assert info["build"]["built"] is True and info["build"]["library"].endswith(".so")


def test_info_with_a_bad_spec_and_an_unknown_command_fail_in_one_line() -> None:
    bad = run_module("info", spec='{"devices": [{"name": "one", "memory": 0}]}')
    assert bad.returncode == 2 and bad.stderr.startswith("error: BRINGUP_EMU_SPEC: devices[0].memory: 0 must be")
    unknown = run_module("frobnicate")
    assert unknown.returncode == 2 and len(unknown.stderr.splitlines()) == 1 and "usage:" in unknown.stderr
