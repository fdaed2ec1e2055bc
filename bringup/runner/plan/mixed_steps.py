"""The mixed_steps row: how a step of decodes and prompt chunks runs when it has more rows than the fused decode layers
serve (up to that many, every prompt token is a row of their own, executor._run_as_rows).

Past them the step runs either as one forward through the model's modules -- every weight read once, the decodes
attending as a group of their own over their gathered contexts -- or as two: the decodes through the fused decode
layers, which read each context straight from the cache, and the prompts through the modules, every weight read twice.
What the second read costs is fixed; what the decodes' gather costs grows with their contexts. So a step of DECODES
decodes and a prompt chunk just past the kernel's rows is timed both ways with the decodes at a short context and at a
long one (plain data here: engine/mixed_timing.py times them), and a step splits from the decodes' average context where
the line through the two gains crosses zero -- never where the long context's gain is within the timings' noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bringup.runner.plan.choice import Choice
from bringup.runner.plan.noise import contended, floor_noise, kept, percent

DECODES = 8  # the decodes of a timed step (or the plan's max_num_seqs, where fewer)
LONG_CONTEXT = 512  # the decodes' long context (or what the cache and the model's context hold, where less)
ONE_FORWARD = "one forward"


@dataclass(frozen=True)
class MixedTimings:
    """Seconds of each run of a step of `decodes` decodes and a `tokens`-token prompt chunk, by the decodes' context:
    as one forward (`one`) and as two (`two`), the two alternated."""

    decodes: int
    tokens: int
    one: dict[int, list[float]]
    two: dict[int, list[float]]
    cpu_share: float | None = None  # of the CPU the timed threads got (None: not measured, or replayed from a record)


def split_from(timings: MixedTimings) -> int | None:
    """The decodes' average context from which a step past the kernel's rows splits (0: always), or None (never)."""
    short, long = sorted(timings.one)[0], sorted(timings.one)[-1]
    one = {c: min(runs) for c, runs in timings.one.items()}
    two = {c: min(runs) for c, runs in timings.two.items()}
    if long == short or not kept(two[long], one[long], noise(timings)):
        return None
    gain_short, gain_long = one[short] - two[short], one[long] - two[long]
    if gain_short >= 0:
        return 0
    return math.ceil(short + -gain_short * (long - short) / (gain_long - gain_short))


def noise(timings: MixedTimings) -> float:
    return max(floor_noise(runs) for side in (timings.one, timings.two) for runs in side.values())


def choose_mixed_steps(timings: MixedTimings | None, how: str, why_not: str = "") -> Choice:
    """The row: split from a context, or one forward (None), with the timings or why they were not taken."""
    if timings is None:
        return Choice(None, f"{ONE_FORWARD}: not timed ({why_not})" if why_not else f"{ONE_FORWARD}: not timed")
    runs = min(len(r) for side in (timings.one, timings.two) for r in side.values())
    timed = "; ".join(f"decodes at context {c}: one forward {min(timings.one[c]) * 1e3:.1f} ms, two "
                      f"{min(timings.two[c]) * 1e3:.1f} ms" for c in sorted(timings.one))
    said = (f"a step of {timings.decodes} decodes and a {timings.tokens}-token prompt chunk, {timed} (the fastest of "
            f"{runs} runs each, alternated, {how}; floor noise {noise(timings):.0%})")
    if contended(timings.cpu_share):
        return Choice(None, f"{ONE_FORWARD}: the timed threads had {percent(timings.cpu_share or 0.0)} of the CPU, "
                            f"not clean evidence for a split: {said}")
    start = split_from(timings)
    if start is None:
        return Choice(None, f"{ONE_FORWARD}: two forwards not faster beyond the noise at the long context: {said}")
    where = "always" if start == 0 else f"where the decodes' contexts average {start} tokens or more"
    return Choice(start, f"past the fused decode layers' rows, the decodes through them and the prompts through the "
                         f"modules as two forwards {where} (the line through the two gains): {said}")

