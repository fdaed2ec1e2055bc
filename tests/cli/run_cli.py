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
    result = CliResult(code, out.getvalue(), err.getvalue())
    if "--json" in args and code in (0, 1) and result.stdout.lstrip().startswith("{"):
        from tests.json_schemas import assert_valid_output

        assert_valid_output(result.stdout)  # every --json document a test sees validates against its schema
    return result
