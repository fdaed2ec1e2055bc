"""Logging set-up: one rich handler on stderr for every `bringup.*` logger."""

import logging

from rich.console import Console
from rich.logging import RichHandler

ROOT_NAME = "bringup"


def get_logger(name: str) -> logging.Logger:
    return logging.getLogger(f"{ROOT_NAME}.{name}")


def configure_logging(verbose: bool, quiet: bool = False) -> None:
    root = logging.getLogger(ROOT_NAME)
    level = logging.DEBUG if verbose else (logging.WARNING if quiet else logging.INFO)
    root.setLevel(level)
    if not any(getattr(h, "_bringup", False) for h in root.handlers):
        handler = RichHandler(
            console=Console(stderr=True),
            show_time=False,
            show_path=verbose,
            rich_tracebacks=False,
            markup=False,
        )
        handler._bringup = True  # type: ignore[attr-defined]
        root.addHandler(handler)
    root.propagate = False
