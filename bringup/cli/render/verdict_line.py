"""The verdict's one overall line for the terminal, coloured by its status."""

from bringup.profiles.verdict import Verdict
from bringup.terminal_text import markup_safe

STYLE = {"READY": "bold green", "READY WITH WARNINGS": "bold yellow", "NOT READY": "bold red"}


def verdict_markup(verdict: Verdict) -> str:
    """`verdict: NOT READY (2 failures): look at verify-ops softmax[float32] …` with the status in colour."""
    headline = verdict.headline()
    rest = verdict.line()[len(headline):]
    return f"verdict: [{STYLE[verdict.status]}]{headline}[/]{markup_safe(rest)}"
