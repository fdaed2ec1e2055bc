"""The real CLI in a child process, for cases whose failure would show only outside Python: a panic or an abort of
a native library (Rust prints its backtrace to the process's stderr, past run_cli's capture), or peak memory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD_SECONDS = 90  # a refusal takes about 3 s, most of it importing torch
# runs bringup's main in this interpreter and writes its peak RSS (KiB) to argv[1] on the way out: VmHWM, the high
# water mark of this program's own memory (ru_maxrss would keep the forking pytest process's size across exec)
MEASURED_MAIN = ("import atexit, sys; out = sys.argv.pop(1); sys.argv[0] = 'bringup'; "
                 "peak = lambda: next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')); "
                 "atexit.register(lambda: open(out, 'w').write(peak())); from bringup.cli.app import main; main()")


def measured_cli(tmp_path: Path, args: list[str]) -> tuple[subprocess.CompletedProcess, float]:
    """`bringup <args>` in a child process: its result and peak RSS in MB (stderr at the descriptor, so a panic
    message the Rust side prints would be seen; 0 MB when the child died before its exit handlers ran)."""
    peak = tmp_path / "peak.txt"
    peak.unlink(missing_ok=True)
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", MEASURED_MAIN, str(peak), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=CHILD_SECONDS)
    return done, int(peak.read_text()) / 1024 if peak.exists() else 0.0  # VmHWM is in KiB


def assert_one_error_line(code: int, stdout: str, stderr: str, *words: str) -> None:
    """Exit 2, no traceback and no panic, one `error:` line and nothing after it, holding each of `words`."""
    assert code == 2, stderr
    assert "Traceback" not in stdout + stderr and "panicked" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    assert stderr.rstrip().endswith(errors[0]), stderr  # nothing printed after it
    for word in words:
        assert word in errors[0], errors[0]
