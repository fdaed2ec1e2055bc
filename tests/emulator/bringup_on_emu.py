"""`python -m bringup ...` in a child process that has the emu device, for stages whose own children (collective
ranks, their start-up helper) must see it too: those are fresh interpreters, which get the device only through
torch's `torch.backends` entry point -- so without it installed these tests skip, saying so."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from tests.emulator.emu_process import emu_env

ENTRY_POINT_GROUP = "torch.backends"


@dataclass
class EmuRun:
    code: int
    stdout: str
    stderr: str

    def document(self) -> dict[str, Any]:
        """The --json document on stdout, checked against its published schema."""
        from tests.json_schemas import assert_valid_output

        assert self.stdout.lstrip().startswith("{"), f"no JSON (exit {self.code}):\n{self.stderr[-3000:]}"
        return assert_valid_output(self.stdout)


def require_entry_point() -> None:
    names = [e.value for e in metadata.entry_points(group=ENTRY_POINT_GROUP)]
    if not any(value.startswith("bringup_emu") for value in names):
        pytest.skip("the bringup_emu torch.backends entry point is not installed (pip install -e emulator/): "
                    "the collective ranks, fresh interpreters, would not see the emu device")


def run_bringup(args: list[str], spec: str | dict, cwd: Path, extra_env: dict[str, str] | None = None,
                timeout: float = 180) -> EmuRun:
    env = {**emu_env(spec), **(extra_env or {})}
    done = subprocess.run([sys.executable, "-m", "bringup", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)
    return EmuRun(done.returncode, done.stdout, done.stderr)


def spec_of(devices: int, **fields: Any) -> str:
    """An inline spec of `devices` identical discrete devices, plus the given fields."""
    return json.dumps({"devices": [{"name": "Emu twin", "memory": "256MiB"}] * devices, **fields})
