"""Run the real `bringup` entry point in-process, capturing exit code and output."""

import contextlib
import io
import sys
from dataclasses import dataclass

from bringup.cli.app import main


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str


def run_cli(args: list[str]) -> CliResult:
    """rich consoles write to whatever sys.stdout/sys.stderr are at call time, so redirecting them suffices."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["bringup", *args]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = argv
    return CliResult(code, out.getvalue(), err.getvalue())
