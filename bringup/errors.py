"""Errors a user can cause: the CLI prints them as one line and exits 2."""


class BringupError(Exception):
    """A problem with the input or environment, explained in one line: what, why, what to do."""

    exit_code = 2


class StrictFallbackError(BringupError):
    """A fallback happened while --strict was set."""


def exception_line(exc: BaseException, limit: int = 200) -> str:
    """`Type: first line of the message` (at most `limit` characters of it), for logs and plan evidence."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:limit] if lines else ''}"
