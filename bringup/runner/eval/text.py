"""The text an eval scores: a file the user gives, or the project's own docs shipped with the package."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from bringup.bounded_file import FileRefused, read_bounded
from bringup.errors import BringupError
from bringup.runner.eval.identity import text_sha256
from bringup.terminal_text import quoted

DEFAULT_NAME = "default_text.md"
MAX_TEXT_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True)
class EvalText:
    text: str
    source: str  # the file's path, or "built-in (bringup's docs)"
    sha256: str


def default_text() -> EvalText:
    text = resources.files("bringup.runner.eval").joinpath(DEFAULT_NAME).read_text(encoding="utf-8")
    return EvalText(text, "built-in (bringup's docs)", text_sha256(text))


def read_text(path: Path | None) -> EvalText:
    if path is None:
        return default_text()
    try:
        raw = read_bounded(path, MAX_TEXT_BYTES, f"the {MAX_TEXT_BYTES >> 20} MiB an eval text may (cut it)")
    except FileRefused as exc:
        raise BringupError(f"--text {quoted(path)} {exc}; give a UTF-8 text file (or leave --text out for the "
                           "built-in text)") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BringupError(f"--text {quoted(path)}: not UTF-8 (byte {exc.start}); convert it to UTF-8") from None
    if not text.strip():
        raise BringupError(f"--text {quoted(path)}: is empty; give a file with text in it")
    return EvalText(text, str(path), text_sha256(text))
