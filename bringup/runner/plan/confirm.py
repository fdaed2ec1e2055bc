"""Confirm the plan's workload-dependent choices on the model it serves, from a few real decode steps each
(timed by engine/decode_timing.py; this module decides from the timings, which tests give as data).

The profile's evidence was measured on other shapes or another model (bench e2e runs the built-in 2.5M
model), and a choice that pays off there can lose on the served model: a compiled decode 1.20x faster on
the built-in model made a 125M Llama ten times slower. So each candidate of the draft plan — the compiled
forward, the paged decode kernel, a weight layout other than F.linear's, the grouped expert path, the fused
decode layers — is timed against its plain alternative (eager, gather + attention, F.linear, every expert on
every token, the modules as the earlier choices left them) over the same decode steps of the served model, and
kept only when it takes under MARGIN of the plain path's time and wins by more than the spread measured with it.
The batch limit is the knee of decode tokens/s against batch size, but never below the default (or what memory
allows, if less) unless larger batches measured slower beyond the spread in two separate passes (plan/noise.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from bringup.runner.model.moe import DENSE
from bringup.runner.plan.host_kernels import not_confirmed, not_timed
from bringup.runner.plan.noise import beyond_noise, kept, percent
from bringup.runner.plan.plan import FUSED, Choice, ExecutionPlan
from bringup.runner.plan.settings import PLAN_FIELD  # candidate -> the setting it decides

KNEE_GAIN = 1.15  # doubling the batch is worth it while decode tokens/s grows by at least 15 %
MAX_BATCH = 256  # the largest batch the start-up sweep times (engine/decode_timing.py); a record holds no larger

COMPILED, EXPERTS = "compiled", "experts"


@dataclass(frozen=True)
class DecodeTimings:
    """Seconds per decode step of the served model: each candidate with its plain alternative, and by batch."""

    candidates: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (candidate, plain)
    by_batch: dict[int, float] = field(default_factory=dict)  # batch size -> seconds per decode step
    skipped: dict[str, str] = field(default_factory=dict)  # candidate -> why it was not timed
    how: str = ""
    spreads: dict[str, float] = field(default_factory=dict)  # candidate -> relative spread of its repeated timings
    batch_spreads: dict[int, float] = field(default_factory=dict)  # batch size -> relative spread of its steps
    by_batch_again: dict[int, float] = field(default_factory=dict)  # a second pass over the batches below the floor
    memory_batch: int | None = None  # the largest batch the cache held for the sweep (None: not swept)
    cpu_share: float | None = None  # the share of the CPU the timed threads got (plan/cpu_share.py; None: unknown)
    # decode steps past the layout's small steps through the fused decode layers and through the modules: batch ->
    # (fused, modules) seconds, doubling from twice the switch while the fused layers won
    fused_rows: dict[int, tuple[float, float]] = field(default_factory=dict)
    fused_rows_spreads: dict[int, float] = field(default_factory=dict)  # batch -> the pair's floor noise


def confirm_plan(draft: ExecutionPlan, timings: DecodeTimings | None, seqs_requested: bool) -> ExecutionPlan:
    """The plan with each timed candidate kept only where it beat its plain path, and the batch limit at the
    knee (unless the caller fixed it). Without timings (given as data without them) the draft stands."""
    if timings is None:
        return draft
    plan = draft
    for name, (candidate, plain) in timings.candidates.items():
        spread = timings.spreads.get(name, 0.0)
        keep = kept(candidate, plain, spread)
        pair = f"{_ms(candidate)} vs {_ms(plain)} plain per decode step"
        verdict = (f"confirmed on this model: {pair}" if keep else
                   f"not distinguishable from noise on this model (spread {percent(spread)}): {pair}"
                   if kept(candidate, plain) else f"not faster on this model: {pair}")
        decided = _decide(name, getattr(plan, PLAN_FIELD[name]), keep, f"{verdict} ({timings.how})")
        plan = replace(plan, **{PLAN_FIELD[name]: decided})
    if timings.fused_rows and plan.decode_layers.value == FUSED:
        rows = fused_rows(timings)
        pairs = ", ".join(f"{b}: {_ms(f)} vs {_ms(m)}" for b, (f, m) in timings.fused_rows.items())
        served = f"serves decode steps of up to {rows} sequences" if rows else "serves the layout's small steps"
        plan = replace(plan, decode_layers=Choice(FUSED, f"{served} (past the layout's switch, by batch: fused vs "
                                                         f"the modules per decode step, {pairs}); "
                                                         f"{plan.decode_layers.evidence}"))
    for name, why in timings.skipped.items():
        plan = replace(plan, **{PLAN_FIELD[name]: not_timed(name, getattr(plan, PLAN_FIELD[name]), why)})
    if timings.by_batch and not seqs_requested:
        plan = replace(plan, max_num_seqs=batch_limit(timings, draft.max_num_seqs.value))
    return plan


def batch_limit(timings: DecodeTimings, default: int) -> Choice:
    """The knee, unless it is below the floor (the default, or what memory allows if less) without larger batches
    measured slower beyond the spread in both passes: then the floor stands, and the evidence says why."""
    measured = knee(timings.by_batch)
    floor = min(default, timings.memory_batch or default)
    if measured.value >= floor:
        return measured
    spread = max(timings.batch_spreads.values(), default=0.0)
    if slower_twice(timings, measured.value, floor):
        return Choice(measured.value, f"{measured.evidence}; batches above {measured.value} measured slower beyond "
                                      f"the spread ({percent(spread)}) in two passes")
    return Choice(floor, f"default {floor} stands: measured on this model, the knee at {measured.value} is not "
                         f"distinguishable from noise (spread {percent(spread)}; no larger batch measured slower "
                         f"beyond it twice); {measured.evidence}")


def slower_twice(timings: DecodeTimings, chosen: int, floor: int) -> bool:
    """Every batch above `chosen` up to `floor` took longer per token than `chosen`, beyond both sizes' spread, in
    the sweep and again in the second pass."""
    larger = [b for b in timings.by_batch if chosen < b <= floor]
    passes = (timings.by_batch, timings.by_batch_again)
    if not larger or any(b not in p for p in passes for b in (chosen, *larger)):
        return False
    spread = max(timings.batch_spreads.get(b, 0.0) for b in (chosen, *larger))
    return all(beyond_noise(p[chosen] / chosen, p[b] / b, spread) for p in passes for b in larger)


def without_unused_compile(plan: ExecutionPlan, fused_serves_every_decode_step: bool) -> ExecutionPlan:
    """The plan with eager decode when the fused decode layers serve every decode step: the compiled forward,
    which serves decode steps only, would never run, and its graphs would be built at start-up for nothing."""
    if not (fused_serves_every_decode_step and plan.decode_layers.value == FUSED and plan.compiled.value):
        return plan
    return replace(plan, compiled=Choice(None, f"eager: the fused decode layers serve every decode step, so a "
                                               f"compiled forward ({plan.compiled.value}) would never run; profile "
                                               f"said: {plan.compiled.evidence}"))


def fused_rows(timings: DecodeTimings) -> int:
    """The largest batch, doubling, up to which the fused decode layers beat the modules beyond the noise (0: none
    past the layout's switch)."""
    rows = 0
    for batch, (fused, modules) in sorted(timings.fused_rows.items()):
        if not kept(fused, modules, timings.fused_rows_spreads.get(batch, 0.0)):
            break
        rows = batch
    return rows


def _decide(name: str, choice: Choice, keep: bool, verdict: str) -> Choice:
    if keep:
        return Choice(choice.value, f"{verdict}; {choice.evidence}")
    if name == COMPILED:
        return Choice(None, f"eager: compiled ({choice.value}) {verdict}; profile said: {choice.evidence}")
    if name == EXPERTS:
        return Choice(DENSE, f"dense: {choice.value} {verdict}; profile said: {choice.evidence}")
    return not_confirmed(name, choice, verdict)


def knee(by_batch: dict[int, float]) -> Choice:
    """The smallest batch that no larger batch timed beats by KNEE_GAIN in decode tokens/s (a bump between two
    sizes, such as a kernel switching at 8 rows, does not end the search early)."""
    sizes = sorted(by_batch)
    rate = {b: b / by_batch[b] for b in sizes}
    chosen = next(b for b in sizes if all(rate[larger] < KNEE_GAIN * rate[b] for larger in sizes if larger > b))
    table = ", ".join(f"{b}: {rate[b]:.0f}" for b in sizes)
    return Choice(chosen, f"knee of decode tokens/s by batch on this model ({table}): no larger batch gains "
                          f"{KNEE_GAIN - 1:.0%} over {chosen}" if chosen != sizes[-1] else
                  f"decode tokens/s by batch on this model ({table}) still grew at the largest batch timed")


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"

