"""Errors a user can cause: the CLI prints them as one line and exits 2."""


class BringupError(Exception):
    """A problem with the input or environment, explained in one line: what, why, what to do."""

    exit_code = 2


class StrictFallbackError(BringupError):
    """A fallback happened while --strict was set."""
