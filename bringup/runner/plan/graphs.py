"""The plan's graphs row: which batch-size buckets replay captured decode graphs, or off with the reason.

Graphs are chosen only where every check passed, in this order, and the row names the first that did not:
`--graphs off`; the device's backend offers a graph capture; no planned hot-path op runs through the host (a capture
refuses host work: the op is named); the profile's verify-ops record of eager against replay passed at the plan's
dtype (not verified, failed the replay check, or capture refused an op, as recorded); the runner's own capture of
its decode step succeeded and its replay equalled the same step run eagerly; and replay measured faster than eager
on the served model by the plan's noise rule (noise.py). Plain data in, a Choice out: the start-up step
(engine/startup/graphs.py) does the capturing and timing.
"""

from __future__ import annotations

from bringup.profiles.hot_path import SAMPLING_OPS
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.noise import kept, percent

AUTO, OFF = "auto", "off"
GRAPHS_OPTIONS = (AUTO, OFF)
# the runner's replay check: a replay of its captured step against the same step run eagerly, same shapes, same
# kernels, which agree bit for bit or (a kernel choosing its reduction order per launch) to rounding far under this
REPLAY_CHECK_REL = 1e-4


def off(why: str) -> Choice:
    return Choice([], f"off: {why}")


def option_off() -> Choice:
    return off("--graphs off")


def check_graphs_option(value: str) -> str | None:
    """One line saying why `value` is not a --graphs value, or None."""
    if value in GRAPHS_OPTIONS:
        return None
    return f"--graphs {value!r} is not one of {', '.join(GRAPHS_OPTIONS)}; pass auto (the plan decides) or off"


def through_host(notes: dict[str, str], device: str) -> Choice | None:
    """Off when an op the captured step runs goes through the host (`notes`: the host_fallbacks row's ops, each with
    its profile record; sampling aside, it runs outside the graph): a capture refuses host work."""
    inside = {op: why for op, why in notes.items() if op not in SAMPLING_OPS}
    if not inside:
        return None
    return off(f"capture refuses an op: {', '.join(inside)} runs through the host on {device} "
               f"({'; '.join(inside.values())}), and a graph holds device work only")


def replay_check(max_rel: float) -> str | None:
    """Why the runner's replay of its own step is wrong, or None when it equals eager within REPLAY_CHECK_REL."""
    if max_rel <= REPLAY_CHECK_REL:
        return None
    return (f"failed the replay check: the runner's captured decode step replayed {max_rel:.3g} (relative max "
            f"|difference|) away from the same step run eagerly, over {REPLAY_CHECK_REL:g}")


def timed(candidate_s: float, plain_s: float, spread: float) -> tuple[bool, str]:
    """Whether replay is kept over eager by the noise rule, and the timing as evidence."""
    pair = (f"{candidate_s * 1e3:.4g} ms replayed vs {plain_s * 1e3:.4g} ms eager per decode step at batch 1 "
            f"({plain_s / candidate_s:.2f}x)")
    if kept(candidate_s, plain_s, spread):
        return True, pair
    if kept(candidate_s, plain_s):
        return False, f"not distinguishable from noise on this model (spread {percent(spread)}): {pair}"
    return False, f"not faster on this model: {pair}"


def on(batches: list[int], contexts: list[int], verified: str, check: str, timing: str) -> Choice:
    longer = f"; contexts past {contexts[0]} tokens captured when first met (up to {contexts[-1]})" \
        if len(contexts) > 1 else ""
    return Choice(list(batches), f"decode steps captured per batch bucket, padded to it, at {contexts[0]} tokens "
                                 f"of context{longer}; {verified}; {check}; {timing}")
