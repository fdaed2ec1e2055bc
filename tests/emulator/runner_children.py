"""The runner's emu tests: what their child processes run (each one has the emulated device; the pytest process
stays emu-free), the specs they run under, and the profile the stages write there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from bringup_emu.default_spec import DEFAULT_NATIVE
from tests.emulator.emu_process import emu_env, emu_results

MiB = 2**20
SERVE_CAP = 64 * MiB  # small enough that emu:1's memory cap, not 256 sequences, bounds the served KV cache
# emu:0 smaller than the built-in model's weights; bfloat16 (and float64, as MPS does) refused
REFUSING_BF16 = {
    "devices": [{"name": "Emu 4 MiB", "integrated": True, "memory": "4MiB"}, {"name": "Emu dGPU", "memory": SERVE_CAP}],
    "refused_dtypes": ["float64", "bfloat16"],
    "native": list(DEFAULT_NATIVE),  # rsqrt is not: the runner's float16 RMS norm falls back to the host
}
REFUSED_BF16 = "emu: bfloat16 is not supported on emu devices (refused_dtypes in the spec)"

# in a child: bringup commands through typer's runner, several in one process (each is a whole CLI run)
CLI = """
from typer.testing import CliRunner
from bringup.cli.app import app

def cli(*args):
    done = CliRunner().invoke(app, [str(a) for a in args])
    if done.exit_code != 0:
        raise SystemExit(f"bringup {' '.join(map(str, args))} exited {done.exit_code}: {done.output[-3000:]}")
    return done.stdout
"""

# the stages on emu:1, then the runner's RMS norm as the emulator counts it: the ground truth that this profile's
# runs_on states (verify-ops's own placement detection writes the same field)
STAGES = CLI + """
from bringup.backends.registry import device_info
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.store import update_profile
from bringup.runner.model.norm import rms_norm

common = ("--device", "emu:1", "--profile", PROFILE, "--no-isolate")
cli("probe", "--only", "dtypes.float32,dtypes.bfloat16,dtypes.float16", *common)
cli("verify-ops", "--only", "matmul", "--dtype", "float16", "-k", "decode", *common)
x = torch.randn(2, 64, dtype=torch.float16).to("emu:1")
bringup_emu.reset_fallback_counts()
rms_norm(x, torch.ones(64, dtype=torch.float16, device="emu:1"), 1e-6)
counted = bringup_emu.fallback_counts()
evidence = f"{', '.join(sorted(counted))} copied arguments to the host (the emulator's counter)"
record = OpCaseRecord(op="rms_norm", dtype="float16", case="runner rms_norm [2,64]", status="pass",
                      runs_on="host_fallback", runs_on_evidence=evidence)
def mutate(p):
    p.ops = [*p.ops, record]
update_profile(PROFILE, device_info("emu:1"), mutate, stage="verify-ops", status="complete")
report(counted=counted)
"""


def stage_profile(folder: Path) -> tuple[Path, dict[str, Any]]:
    """emu:1's profile under REFUSING_BF16, from the stages (probe's dtypes, one verify-ops case at float16) with
    RMS norm's placement as the emulator counts it; and the counter's calls."""
    profile = folder / "emu1.yaml"
    return profile, emu_results(f"PROFILE = {str(profile)!r}\n{STAGES}", REFUSING_BF16)


def bringup_cli(args: list[str], spec: dict | str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    """`python -m bringup ARGS` in a child process with the emulated device."""
    return subprocess.run([sys.executable, "-m", "bringup", *args], cwd=cwd, env=emu_env(spec), capture_output=True,
                          text=True, timeout=timeout, check=False)


def serve_cli(args: list[str], spec: dict | str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bringup", "serve", *args], cwd=cwd, env=emu_env(spec),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
