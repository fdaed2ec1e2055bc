"""The real `bringup` command in a child process with the emu device active (the pytest process stays emu-free).

The stages start worker processes of their own (the probe's isolated checks, verify-ops' cases), which get the
device only through torch's backend autoload: so these runs need bringup-emu installed, and skip saying so where
it is not.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.emulator.emu_process import emu_env

AUTOLOAD_ENTRY_POINT = "bringup_emu"


def require_autoload() -> None:
    names = {entry.name for entry in metadata.entry_points(group="torch.backends")}
    if AUTOLOAD_ENTRY_POINT not in names:
        pytest.skip("bringup-emu is not installed (pip install -e emulator/): the stages' worker processes get the "
                    "emu device only through torch's backend autoload")


def run_bringup(args: list[str], spec: str | dict, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m bringup ARGS` with BRINGUP_EMU_SPEC=spec, a wide terminal (one line per message), from cwd."""
    require_autoload()
    env = {**emu_env(spec), "COLUMNS": "400"}
    return subprocess.run([sys.executable, "-m", "bringup", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
