"""Words an export prints for a shell: the main command and every `run ...` hint quoted alike, and a model path made
one word that a shell and the engine both read as a path (never as a flag, never split across lines)."""

from __future__ import annotations

import re
import shlex

from bringup.errors import BringupError
from bringup.terminal_text import quoted

MAX_PATH_CHARS = 4096  # PATH_MAX on Linux
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def command(*words: str) -> str:
    """The words as one POSIX shell line, each quoted where it needs to be."""
    return " ".join(shlex.quote(word) for word in words)


def hint(*words: str) -> str:
    """`run `command``: what a left-out setting says to run, quoted as the main command is."""
    return f"run `{command(*words)}`"


def model_path(path: str, what: str) -> str:
    """`path` as the command names the model: `./-x` for a path that starts with `-` (else the engine reads a flag);
    BringupError for one no printed line can hold (empty, too long, a newline or another control character)."""
    if not path.strip():
        raise BringupError(f"{what} is empty; pass the model's path")
    if len(path) > MAX_PATH_CHARS:
        raise BringupError(f"{what} is {len(path):,} characters, more than the {MAX_PATH_CHARS} of a path; pass the "
                           "model's real path")
    if _UNPRINTABLE.search(path):
        raise BringupError(f"{what} {quoted(path)} holds a newline or another control character, which no pasteable "
                           "command line can hold; rename the model's file or directory")
    return f"./{path}" if path.startswith("-") else path
