"""The plan re-confirmed while the server is idle, when the start-up's timings could not be trusted.

A start on a busy machine decides its candidates (the weight layout, the fused decode layers, the paged decode
kernel, the grouped experts) from timings taken while another process held the CPU. When the start's timed threads
got under CONTENDED_SHARE of the CPU, or a candidate lost only inside the noise, the engine re-times the same draft
plan on the same decode steps once the server has been idle IDLE_S, restoring the candidates that lost first. The
plan changes only on clean evidence (the re-timing itself uncontended), between two steps, and the change is logged
and kept in `attempts` (the server shows it at /v1/plan). A request arriving meanwhile stops the re-timing before
its next decode step; the running plan is put back and the attempt retried later, as is a contended one. A compiled
forward is not re-timed (its graphs are not rebuilt at idle): that setting stays as the start chose it. Captured
decode graphs are dropped after each try (they replay the paths and weights they were captured on) and captured
again, and checked, when next met.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone

from bringup.backends.registry import backend_for
from bringup.errors import exception_line
from bringup.log import get_logger
from bringup.profiles.attention_kinds import PAGED_DECODE
from bringup.runner.engine.decode_timing import TimingInterrupted, measure_decode
from bringup.runner.engine.executor import Executor
from bringup.runner.host.decode_layers import FusedDecode
from bringup.runner.host.paged_decode import DecodeAttention
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.confirm import PLAN_FIELD, DecodeTimings, confirm_plan
from bringup.runner.plan.host_kernels import choose_decode_layers, every_step_attention
from bringup.runner.plan.noise import CONTENDED_SHARE, contended, kept, percent
from bringup.runner.plan.plan import FUSED, Choice, ExecutionPlan
from bringup.runner.weights.kinds import CONVERTIBLE

log = get_logger("runner.reconfirm")

IDLE_S = 2.0  # the engine must have been idle this long before it re-times
RETRY_S = (30.0, 120.0, 600.0)  # waits before the next try after a contended or interrupted one (the last repeats)
MAX_ATTEMPTS = 8
RECONFIRMED = tuple(name for name in PLAN_FIELD.values() if name != "compiled")  # the settings it may change

Measure = Callable[[Executor, ExecutionPlan, "int | None", Callable[[], bool]], DecodeTimings]


def real_measure(executor: Executor, draft: ExecutionPlan, free_bytes: int | None,
                 interrupted: Callable[[], bool]) -> DecodeTimings:
    graphs, executor.graphs = executor.graphs, None  # the candidates timed on the eager step, as at start-up
    try:
        return measure_decode(executor, draft, free_bytes, sweep=False, interrupted=interrupted)
    finally:
        executor.graphs = graphs


def why_reconfirm(timings: DecodeTimings | None, replayed: bool) -> str | None:
    """Why the start's confirmation should be re-timed at idle; None when its evidence is trustworthy as it is."""
    if timings is None or replayed or not timings.candidates:
        return None
    if contended(timings.cpu_share):
        return (f"the start's timed threads had {percent(timings.cpu_share or 0.0)} of the CPU (under "
                f"{percent(CONTENDED_SHARE)}: the machine was busy)")
    noisy = [name for name, (c, p) in timings.candidates.items()  # confirm.py's "not distinguishable from noise"
             if kept(c, p) and not kept(c, p, timings.spreads.get(name, 0.0))]
    if noisy:
        return f"{', '.join(noisy)} lost to the plain path only inside the noise at the start"
    return None


@dataclass
class Attempt:
    at: str  # UTC, ISO 8601
    outcome: str  # switched | confirmed | contended | interrupted | failed
    cpu_share: float | None
    detail: str


@dataclass
class Reconfirmation:
    """What the engine needs to re-time its start's draft plan, and what came of each try."""

    draft: ExecutionPlan  # the plan before the start's confirmation
    draft_layout: WeightLayout  # the weight layout the draft stored
    why: str | None  # why re-timing is wanted (None: it is not)
    measure: Measure = real_measure
    idle_s: float = IDLE_S
    attempts: list[Attempt] = field(default_factory=list)
    _next_at: float = 0.0
    _idle_since: float | None = None

    @property
    def pending(self) -> bool:
        return self.why is not None and len(self.attempts) < MAX_ATTEMPTS and not any(
            a.outcome in ("switched", "confirmed", "failed") for a in self.attempts)

    def report(self) -> dict:
        state = "not needed" if self.why is None else "pending" if self.pending else "done"
        return {"state": state, "why": self.why, "attempts": [asdict(a) for a in self.attempts]}

    def idle(self, engine, interrupted: Callable[[], bool]) -> bool:  # type: ignore[no-untyped-def]
        """Called by the server's engine loop while no request runs: re-time when due. Whether it timed."""
        now = time.monotonic()
        if self._idle_since is None:
            self._idle_since = now
        if not self.pending or now - self._idle_since < self.idle_s or now < self._next_at:
            return False
        self.run(engine, interrupted)
        self._next_at = time.monotonic() + RETRY_S[min(len(self.attempts) - 1, len(RETRY_S) - 1)]
        return True

    def busy(self) -> None:
        """A request ran: the idle time starts again."""
        self._idle_since = None

    def run(self, engine, interrupted: Callable[[], bool]) -> None:  # type: ignore[no-untyped-def]
        """One try: the draft's candidates restored and timed against their plain paths, the plan switched only on
        clean timings; on anything else the running plan is put back as it was."""
        try:
            self._try(engine, interrupted)
        finally:
            if engine.executor.graphs is not None:  # they replay the paths and weights they were captured on
                engine.executor.graphs.drop_captures()

    def _try(self, engine, interrupted: Callable[[], bool]) -> None:  # type: ignore[no-untyped-def]
        executor, model = engine.executor, engine.executor.model
        saved = (executor.fused, executor.compiled, model.decode_attend, model.layout)
        at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            draft = self._restore_draft(executor, engine.plan)
            timings = self.measure(executor, draft, _free_bytes(model), interrupted)
        except TimingInterrupted:
            self._put_back(executor, saved)
            self._note(Attempt(at, "interrupted", None, "a request arrived; the running plan is kept, and "
                                                        "the re-timing tried again later"))
            return
        except Exception as exc:  # the running plan stands; the reason is logged and shown
            self._put_back(executor, saved)
            self._note(Attempt(at, "failed", None, f"re-timing failed: {exception_line(exc)}; the start's plan "
                                                   "stands"), warn=True)
            return
        if contended(timings.cpu_share):
            self._put_back(executor, saved)
            self._note(Attempt(at, "contended", timings.cpu_share, f"the timed threads had "
                                                                   f"{percent(timings.cpu_share or 0.0)} of the "
                                                                   "CPU: not clean evidence; tried again later"))
            return
        confirmed = confirm_plan(draft, timings, seqs_requested=True)
        plan, changes = _switched(engine.plan, confirmed, at)
        executor.follow(plan)
        engine.plan = plan
        if changes:
            self._note(Attempt(at, "switched", timings.cpu_share, "; ".join(changes)), warn=True)
        else:
            self._note(Attempt(at, "confirmed", timings.cpu_share, "clean timings agree with the start's plan"))

    def _restore_draft(self, executor: Executor, running: ExecutionPlan) -> ExecutionPlan:
        """Put the draft's candidates back on the executor for timing; the draft as measure_decode reads it (the
        compiled forward as the start left it)."""
        model, draft = executor.model, replace(self.draft, compiled=running.compiled)
        layout = self.draft_layout
        _store_kinds(model, layout.kinds)
        model.use_layout(WeightLayout(layout.small, layout.large, layout.switch_tokens))
        if PAGED_DECODE in draft.attention.value and model.decode_attend is None:
            names = every_step_attention(draft.attention.value)
            model.decode_attend = DecodeAttention(executor.recorder, instead=f"gather + {names[0]}")
        if draft.decode_layers.value == FUSED and executor.fused is None:
            executor.fused, choice = choose_decode_layers(model, draft.block_size, draft.max_model_len.value,
                                                          draft.kv_blocks.value)
            draft = replace(draft, decode_layers=choice)
        return draft

    @staticmethod
    def _put_back(executor: Executor, saved: tuple) -> None:
        """The running plan's paths as they were before the try (weights the timing freed made again, and the fused
        decode layers rebuilt on them: they read the model's own copy)."""
        fused, executor.compiled, executor.model.decode_attend, layout = saved
        made = _store_kinds(executor.model, layout.kinds)
        executor.model.use_layout(layout)
        executor.fused = FusedDecode(executor.model) if fused is not None and made else fused

    def _note(self, attempt: Attempt, warn: bool = False) -> None:
        self.attempts.append(attempt)
        (log.warning if warn else log.info)("plan re-confirmed at idle: %s (%s)", attempt.outcome, attempt.detail)


def _switched(running: ExecutionPlan, confirmed: ExecutionPlan, at: str) -> tuple[ExecutionPlan, list[str]]:
    """The running plan with each re-timed setting as the clean timings chose it, and the changes in words."""
    settings, changes = {}, []
    for name in RECONFIRMED:
        old, new = getattr(running, name), getattr(confirmed, name)
        if new.value != old.value:
            changes.append(f"{name}: {old.value} -> {new.value}")
        settings[name] = Choice(new.value, f"re-confirmed at idle at {at}: {new.evidence}")
    return replace(running, **settings), changes


def _store_kinds(model, kinds: list[str]) -> bool:  # type: ignore[no-untyped-def]
    """Store the linear weights as each of `kinds` not stored now, converted from a stored copy; whether any was."""
    missing = [kind for kind in kinds if kind not in model.stored_kinds]
    for kind in missing:
        source = next((k for k in model.stored_kinds if k in CONVERTIBLE), None)
        if source is None or kind not in CONVERTIBLE:
            raise ValueError(f"{kind} weights cannot be made from the stored {', '.join(model.stored_kinds)}")
        model.add_kind(kind, source)
    return bool(missing)


def _free_bytes(model) -> int | None:  # type: ignore[no-untyped-def]
    device = model.device
    return backend_for(device).memory(device.index or 0)[1]
