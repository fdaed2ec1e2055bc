"""Run an external tool with a hard time limit; a missing, hanging or failing tool becomes a short reason."""

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

TOOL_TIMEOUT_S = 4.0
NOT_FOUND = "not found"
REASON_LIMIT = 160

T = TypeVar("T")


@dataclass(frozen=True)
class ToolResult:
    output: str | None  # stdout when the tool ran and exited 0
    reason: str | None  # why there is no output: "not found", "timed out after 4 s", "exit 1: ..."

    @property
    def ok(self) -> bool:
        return self.output is not None


def one_line(text: str, limit: int = REASON_LIMIT) -> str:
    """Whitespace collapsed, non-printable characters dropped, cut to `limit` characters."""
    flat = " ".join("".join(c for c in text if c.isprintable() or c.isspace()).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def kill_group(process: subprocess.Popen) -> None:
    """The tool and anything it started: a child holding the pipe open would otherwise keep us waiting."""
    with contextlib.suppress(OSError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        process.kill()


def run_tool(argv: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> ToolResult:
    executable = shutil.which(argv[0])
    if executable is None:
        return ToolResult(None, NOT_FOUND)
    try:
        process = subprocess.Popen(
            [executable, *argv[1:]], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, errors="replace", start_new_session=True,
        )
    except OSError as exc:
        return ToolResult(None, one_line(f"cannot start: {exc.strerror or exc}"))
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=1.0)
        return ToolResult(None, f"timed out after {timeout:g} s")
    if process.returncode != 0:
        detail = (stderr or stdout).strip().splitlines()
        return ToolResult(None, one_line(f"exit {process.returncode}" + (f": {detail[0]}" if detail else "")))
    return ToolResult(stdout, None)


def first_line(result: ToolResult) -> str:
    """The tool's first non-empty output line, or the reason it has none."""
    if not result.ok:
        return result.reason or NOT_FOUND
    lines = [line for line in (result.output or "").splitlines() if line.strip()]
    return one_line(lines[0]) if lines else "no output"


def guarded(probe: Callable[[], T], fallback: Callable[[str], T]) -> T:
    """`probe()`, or `fallback(reason)` when it raises: one broken probe never breaks the report."""
    try:
        return probe()
    except Exception as exc:
        return fallback(one_line(f"error: {type(exc).__name__}: {exc}"))


def run_all(calls: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Independent probes at once, so their time limits overlap instead of adding up."""
    if not calls:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(calls))) as pool:
        futures = {name: pool.submit(call) for name, call in calls.items()}
        return {name: future.result() for name, future in futures.items()}
