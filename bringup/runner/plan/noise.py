"""The machine's own noise, and the rule that no choice is made from it.

Interference from other work (a neighbour on a shared machine, a busy loop on one core) only ever adds time, so
every timing the plan decides from is a floor: the fastest of several short repetitions, the sides timed in turn.
How far a floor can be trusted is how well repeated floors agree (floor_noise: the gap between the two fastest),
not the spread of all repetitions, which a busy hour makes huge while the floors stay put. A timed choice that would
make the plan slower or smaller than the conservative default (a batch limit below the default, a hand-written
kernel kept over the plain path) must win by more than that noise. Beside the timings, the share of the CPU the
timed threads got (cpu_share.py) says whether the machine was contended while they ran.
"""

from __future__ import annotations

from statistics import median

from bringup.runner.plan.plan import MARGIN

CONTENDED_SHARE = 0.85  # below this share of its threads' CPU time, a timing ran on a contended machine


def relative_spread(seconds: list[float]) -> float:
    """(slowest − fastest) / median of repeated timings of one thing: 0.0 when timed once (shown, not decided on)."""
    if len(seconds) < 2:
        return 0.0
    middle = median(seconds)
    return (max(seconds) - min(seconds)) / middle if middle > 0 else 0.0


def floor_noise(seconds: list[float]) -> float:
    """(second fastest − fastest) / fastest of repeated floors of one thing: how far the floor itself moved between
    repetitions. 0.0 when timed once."""
    if len(seconds) < 2:
        return 0.0
    fastest, second = sorted(seconds)[:2]
    return (second - fastest) / fastest if fastest > 0 else 0.0


def beyond_noise(faster_s: float, slower_s: float, spread: float) -> bool:
    """`faster_s`, slowed by the relative `spread` of the timings, is still faster than `slower_s`."""
    return faster_s * (1.0 + spread) < slower_s


def kept(candidate_s: float, plain_s: float, spread: float = 0.0) -> bool:
    """A measured candidate over its plain path: under MARGIN of its time, and faster beyond the timings' noise."""
    return candidate_s < MARGIN * plain_s and beyond_noise(candidate_s, plain_s, spread)


def contended(share: float | None) -> bool:
    """Whether the timed threads got less than CONTENDED_SHARE of the CPU time they asked for (None: not known)."""
    return share is not None and share < CONTENDED_SHARE


def percent(spread: float) -> str:
    return f"{spread:.0%}"
