"""Run code in a child process that has the emu device (the pytest process itself stays emu-free)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EMULATOR = REPO / "emulator"

# the entry point activates the device at `import torch`; where the package is not installed, activate it here
PRELUDE = """
import json, os, sys
import torch
import bringup_emu
if not bringup_emu.is_active():
    from bringup_emu.autoload import activate
    activate(os.environ["BRINGUP_EMU_SPEC"])
def report(**values):
    print("EMU-RESULT " + json.dumps(values))
"""


def emu_env(spec: str | dict | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env.pop("BRINGUP_EMU_SPEC", None)
    if spec is not None:
        env["BRINGUP_EMU_SPEC"] = spec if isinstance(spec, str) else json.dumps(spec)
    paths = [str(EMULATOR), str(REPO), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def run_python(code: str, spec: str | dict | None, timeout: float = 180,
               extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=emu_env(spec) | (extra_env or {}), capture_output=True,
                          text=True, timeout=timeout, check=False)


def run_emu(body: str, spec: str | dict = "default", timeout: float = 180) -> subprocess.CompletedProcess:
    return run_python(PRELUDE + body, spec, timeout)


def emu_results(body: str, spec: str | dict = "default") -> dict[str, Any]:
    """What the body passed to report(...), from a child that must exit cleanly."""
    done = run_emu(body, spec)
    assert done.returncode == 0, f"child failed (rc {done.returncode}):\n{done.stderr[-4000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("EMU-RESULT ")]
    assert lines, f"child reported nothing:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return json.loads(lines[-1].removeprefix("EMU-RESULT "))
