"""`-h` everywhere, shell completion through the lazy group, `--quiet`, and timestamps in `bringup all`'s log."""

import io
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.cli.app import COMMANDS
from bringup.log import capture_to_file, get_logger
from tests.cli.run_cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args", [[], *([c.name] for c in COMMANDS), ["profile", "diff"]],
                         ids=lambda a: " ".join(a) or "bringup")
def test_dash_h_is_help(args):
    result = run_cli([*args, "-h"])
    assert result.code == 0 and "Usage:" in result.stdout and "--help" in result.stdout, result.stderr


def complete(words: str, cword: int, tmp_path: Path) -> list[str]:
    """What bash completion offers for `words`, from the real entry point (as the installed script runs it)."""
    env = {**os.environ, "_BRINGUP_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword),
           "PYTHONPATH": str(ROOT)}
    code = "import sys; sys.argv[0] = 'bringup'; from bringup.cli.app import main; main()"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_completion_offers_lazy_commands_and_their_options(tmp_path):
    assert {"verify-ops", "verify-collectives"} <= set(complete("bringup verify", 1, tmp_path))
    assert complete("bringup bench --on", 2, tmp_path) == ["--only"]
    assert "--skip" in complete("bringup verify-ops --sk", 2, tmp_path)


def test_completion_script_and_install_options_exist():
    result = run_cli(["--help"])
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


def test_quiet_prints_nothing_but_errors(tmp_path):
    profile = str(tmp_path / "p.yaml")
    loud = run_cli(["devices", "--device", "cpu", "--profile", profile])
    assert loud.code == 0 and loud.stdout.strip() and "selected" in loud.stderr
    quiet = run_cli(["--quiet", "devices", "--device", "cpu", "--profile", profile])
    assert quiet.code == 0 and quiet.stdout == "" and quiet.stderr == ""
    bad = run_cli(["-q", "devices", "--device", "nope"])
    assert bad.code == 2 and bad.stderr.startswith("error: ") and len(bad.stderr.strip().splitlines()) == 1
    document = run_cli(["-q", "devices", "--device", "cpu", "--profile", profile, "--json"])
    assert document.code == 0 and document.stdout.lstrip().startswith("{") and document.stderr == ""
    again = run_cli(["devices", "--device", "cpu", "--profile", profile])  # --quiet does not outlive its run
    assert again.stdout.strip() and "selected" in again.stderr


def test_log_file_lines_carry_utc_timestamps():
    stream = io.StringIO()
    terminal = logging.NullHandler()
    terminal.setLevel(logging.WARNING)
    with capture_to_file(stream, verbose=False, terminal=terminal):
        get_logger("test").info("a fact for the log")
    line = stream.getvalue().strip()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO +bringup\.test: a fact for the log", line), line


def test_quiet_all_keeps_the_full_log_file_with_timestamps(tmp_path):
    path = tmp_path / "cpu.yaml"
    result = run_cli(["-q", "all", "--only", "devices", "--device", "cpu", "--profile", str(path)])
    assert result.code == 0 and result.stdout == "" and result.stderr == "", result.stderr
    log = path.with_name("cpu.all.log").read_text(encoding="utf-8")
    assert "torch can use" in log  # the devices stage's own output went to the log
    stamped = [line for line in log.splitlines() if re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ", line)]
    assert any("INFO" in line and "stage devices" in line for line in stamped)
