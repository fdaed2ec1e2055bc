"""The emulator's tests: the extension is built once per session (in a child process), then every test drives
the device in child processes with BRINGUP_EMU_SPEC set."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.emulator.emu_process import EMULATOR, emu_env

if str(EMULATOR) not in sys.path:
    sys.path.insert(0, str(EMULATOR))


@pytest.fixture(scope="session", autouse=True)
def emu_extension_built() -> None:
    from bringup_emu.build import missing_toolchain

    missing = missing_toolchain()
    if missing:
        pytest.skip(f"the emulated device cannot be built here: {missing}")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bringup_emu", "build"], env=emu_env(None),
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"building the emulator failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    print(f"\nemulator extension ready in {time.perf_counter() - started:.1f} s: {done.stdout.strip()}")
