"""Where output goes: tables and JSON to stdout, logs and progress to stderr."""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import textwrap
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.text import Text

from bringup.terminal_text import shown

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console()
err_console = Console(stderr=True)
# `bringup all` sets this: a stage's progress bar then disappears when the stage ends
transient_progress = False
# `bringup --quiet`: errors only (see be_quiet)
quiet = False


def set_quiet(on: bool) -> None:
    """`bringup --quiet`: tables and summaries on stdout are dropped, logs show errors only, no progress bars.
    Errors (err_console, one line) and `--json` documents still print."""
    global quiet
    from bringup.log import set_quiet as quiet_logs

    quiet = on
    console.quiet = on
    quiet_logs(on)


@contextlib.contextmanager
def into_log() -> Iterator[None]:
    """Under `bringup all`, a stage's tables go to the log file even with --quiet (the terminal stays quiet)."""
    console.quiet = False
    try:
        yield
    finally:
        console.quiet = quiet


def plain(value: object) -> Text:
    """A table cell or printable from outside text (a profile, a model, the OS): markup never interpreted, control
    characters shown as escapes."""
    return Text(shown(value))


def schema_id(document: str) -> str:
    """`bringup.<document>/v1`: the id a `--json` document carries, and the name of its schema in docs/schemas/."""
    return f"bringup.{document}/v1"


def print_json(document: str, data: dict[str, Any]) -> None:
    """One `--json` document: `{"schema": "bringup.<document>/v1", ...}` (published in docs/schemas/)."""
    print(json.dumps({"schema": schema_id(document), **data}, indent=2, default=str), flush=True)


def progress(json_mode: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        # `all` into a file, or --quiet: no bars
        disable=json_mode or quiet or (transient_progress and not err_console.is_terminal),
        transient=transient_progress,
    )


def terminal_width() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def fit_lines(text: str, max_lines: int, width: int | None = None) -> str:
    """`text` wrapped to the terminal width, cut to `max_lines` lines (the last ending in … when cut)."""
    width = width or terminal_width()
    lines = textwrap.wrap(" ".join(text.split()), width=max(20, width - 1)) or [""]
    if len(lines) > max_lines:
        lines = lines[:max_lines]
        lines[-1] = lines[-1][: max(0, width - 2)].rstrip() + "…"
    return "\n".join(lines)


def name_some(names: list[str], shown: int = 3) -> str:
    """`a, b, c and 12 more`: a few names out of a long list."""
    if len(names) <= shown + 1:
        return ", ".join(names)
    return f"{', '.join(names[:shown])} and {len(names) - shown} more"


def format_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.1f} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{n} B"


class CompactWarnings(logging.Handler):
    """Under `bringup all`: each distinct WARNING+ message once, in at most two lines, at most `limit` of them."""

    def __init__(self, limit: int = 8) -> None:
        super().__init__(logging.WARNING)
        self.limit = limit
        self.seen: set[str] = set()
        self.suppressed = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message in self.seen:
            return
        self.seen.add(message)
        if len(self.seen) > self.limit:
            self.suppressed += 1
            return
        from bringup.terminal_text import markup_safe

        label = record.levelname.lower()
        style = "red" if record.levelno >= logging.ERROR else "yellow"
        text = fit_lines(f"{label}: {message}", 2)
        err_console.print(f"[{style}]{label}:[/]{markup_safe(text[len(label) + 1:])}", highlight=False)
