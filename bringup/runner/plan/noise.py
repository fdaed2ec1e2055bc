"""The machine's own noise, and the rule that no choice is made from it.

A timed choice that would make the plan slower or smaller than the conservative default (a batch limit below the
default, a hand-written kernel kept over the plain path) must win by more than the spread measured alongside it:
a neighbour's burst during one measurement is not evidence. Inside the spread, the default stands and says so.
"""

from __future__ import annotations

from statistics import median

from bringup.runner.plan.plan import MARGIN


def relative_spread(seconds: list[float]) -> float:
    """(slowest − fastest) / median of repeated timings of one thing: 0.0 when timed once."""
    if len(seconds) < 2:
        return 0.0
    middle = median(seconds)
    return (max(seconds) - min(seconds)) / middle if middle > 0 else 0.0


def beyond_noise(faster_s: float, slower_s: float, spread: float) -> bool:
    """`faster_s`, slowed by the relative `spread` of the timings, is still faster than `slower_s`."""
    return faster_s * (1.0 + spread) < slower_s


def kept(candidate_s: float, plain_s: float, spread: float = 0.0) -> bool:
    """A measured candidate over its plain path: under MARGIN of its time, and faster beyond the timings' spread."""
    return candidate_s < MARGIN * plain_s and beyond_noise(candidate_s, plain_s, spread)


def percent(spread: float) -> str:
    return f"{spread:.0%}"
