"""Logging set-up: one rich handler on stderr for every `bringup.*` logger, and third-party warnings.

Warnings that other libraries raise through `warnings.warn` (torch, transformers...) become records of
`bringup.warnings`, shown on the terminal only with `-v`; they never interleave with a stage's output.
`bringup all` adds a log file (see capture_to_file): everything goes there, only WARNING+ to the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import time
import warnings
from collections.abc import Iterator
from typing import Any, TextIO

ROOT_NAME = "bringup"
WARNINGS_LOGGER = f"{ROOT_NAME}.warnings"


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT_NAME}.{name}")


def log_python_warning(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                       line: str | None = None) -> None:
    """A `warnings.showwarning` replacement: the warning becomes one INFO record of `bringup.warnings`."""
    text = str(message).strip().splitlines()
    logging.getLogger(WARNINGS_LOGGER).info("%s: %s (%s:%d)", category.__name__, text[0] if text else "",
                                             filename, lineno)


MAX_RECORD_CHARS = 8000  # of one terminal log record, before rich's highlighter sees it


class TerminalSafeFormatter(logging.Formatter):
    """Log messages carry strings from profiles, models and requests: control characters are shown, not sent, and a
    record is cut to MAX_RECORD_CHARS."""

    def format(self, record: logging.LogRecord) -> str:
        from bringup.terminal_text import shown

        return shown(super().format(record), MAX_RECORD_CHARS)


def terminal_handler(root: logging.Logger) -> logging.Handler | None:
    return next((h for h in root.handlers if getattr(h, "_bringup", False)), None)


def file_capture_active(root: logging.Logger) -> bool:
    return any(getattr(h, "_bringup_file", False) for h in root.handlers)


_quiet = False


def set_quiet(on: bool) -> None:
    """`bringup --quiet`: the terminal gets ERROR records only, whatever a command asks."""
    global _quiet
    changed, _quiet = on != _quiet, on
    handler = terminal_handler(logging.getLogger(ROOT_NAME))
    if handler is not None and changed:
        handler.setLevel(logging.ERROR if on else logging.NOTSET)


def configure_logging(verbose: bool, quiet: bool = False) -> None:
    root = logging.getLogger(ROOT_NAME)
    warnings.showwarning = log_python_warning
    if file_capture_active(root):  # under `bringup all`: the file keeps INFO (DEBUG with -v) whatever a stage asks
        root.setLevel(min(root.level, logging.DEBUG if verbose else logging.INFO))
        return
    level = logging.DEBUG if verbose else (logging.WARNING if quiet else logging.INFO)
    root.setLevel(level)
    logging.getLogger(WARNINGS_LOGGER).setLevel(logging.NOTSET if verbose else logging.CRITICAL + 1)
    if terminal_handler(root) is None:
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(
            console=Console(stderr=True),
            show_time=False,
            show_path=verbose,
            rich_tracebacks=False,
            markup=False,
        )
        handler.setFormatter(TerminalSafeFormatter())
        handler._bringup = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    if _quiet:
        terminal_handler(root).setLevel(logging.ERROR)  # type: ignore[union-attr]
    root.propagate = False


@contextlib.contextmanager
def capture_to_file(stream: TextIO, verbose: bool, terminal: logging.Handler) -> Iterator[None]:
    """Every `bringup.*` record (INFO, DEBUG with -v) and third-party warning into `stream`; the terminal
    gets what `terminal` (a handler at WARNING or above) lets through. Restores the previous set-up on exit."""
    configure_logging(verbose)
    root = logging.getLogger(ROOT_NAME)
    previous_level = root.level
    saved = list(root.handlers)
    warnings_logger = logging.getLogger(WARNINGS_LOGGER)
    saved_warnings_level = warnings_logger.level
    to_file = logging.StreamHandler(stream)
    to_file.setFormatter(logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)-8s %(name)s: %(message)s",
                                           "%Y-%m-%dT%H:%M:%S"))
    to_file.formatter.converter = time.gmtime  # type: ignore[union-attr]  # UTC, as the profile's stamps
    to_file._bringup_file = True  # type: ignore[attr-defined]
    terminal._bringup = True  # type: ignore[attr-defined]
    if _quiet:
        terminal.setLevel(logging.ERROR)
    root.handlers = [terminal, to_file]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    warnings_logger.setLevel(logging.NOTSET)
    try:
        yield
    finally:
        to_file.flush()
        root.handlers = saved
        root.setLevel(previous_level)
        warnings_logger.setLevel(saved_warnings_level)
