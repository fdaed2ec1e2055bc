"""Time the draft plan's workload-dependent candidates on the served model: a few real decode steps through the
executor for each candidate and its plain alternative, and decode steps by batch size (plan/confirm.py decides
from these timings). Every timing is a floor, the fastest of its steps, because a neighbour's work only ever adds
time; each comes with its noise (how far repeated floors moved, plan/noise.py) and the whole confirmation with the
share of the CPU its threads got (plan/cpu_share.py). Every timing is bounded by a step count and a time budget."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from bringup.backends.host import is_host
from bringup.backends.registry import synchronize
from bringup.log import get_logger
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.model.moe import DENSE, GROUPED, sparse_blocks, use_expert_path
from bringup.runner.plan.confirm import COMPILED, EXPERTS, KNEE_GAIN, MAX_BATCH, DecodeTimings, kept, knee
from bringup.runner.plan.cpu_share import CpuShare
from bringup.runner.plan.host_kernels import FUSED_LAYERS, LAYOUT, PAGED
from bringup.runner.plan.noise import floor_noise
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.weights.kinds import CONVERTIBLE, OUT_IN

if TYPE_CHECKING:
    from bringup.runner.host.decode_layers import FusedDecode

log = get_logger("runner.confirm")  # the decode steps timed to confirm the plan

STEPS = 4  # timed decode steps per measurement (after one untimed step)
ROUNDS = 4  # a candidate and its plain path are each timed this many times, in turn
BUDGET_S = 1.5  # ... or fewer, when they take longer than this
CONTEXT = 128  # tokens of context the timed decode steps start from
PAGED_BATCH = 8  # the batch paged decode is timed on beside the fused decode layers
ROWS_ROUNDS = 2  # turns of each side for the fused decode layers past the layout's switch
SWEEP_BUDGET_S = 3.0


class TimingInterrupted(Exception):
    """The caller asked to stop timing (a request arrived while the server re-timed its plan at idle)."""


def measure_decode(executor: Executor, plan: ExecutionPlan, free_bytes: int | None, sweep: bool,
                   interrupted: Callable[[], bool] | None = None) -> DecodeTimings:
    """Time each candidate of `plan` against its plain path on the served model, one after the other, each with
    the earlier ones decided (a compiled forward that lost is off while the others are timed); with `sweep`,
    decode steps by batch size, and a second pass where the knee falls below the default. The executor is left
    running what the timings decided. `interrupted`, asked before every step, stops it with TimingInterrupted."""
    model = executor.model
    context = sweep_context(plan)
    step = DecodeSteps(executor, context, interrupted=interrupted)
    timed = TimedCandidates(step)
    candidates, spreads = timed.candidates, timed.spreads
    skipped: dict[str, str] = {}
    fused, executor.fused = executor.fused, None  # off while the paths it would replace are timed
    paged_batch = time_paths(timed, executor, plan, fused is not None)
    layout = model.layout
    rows: dict[int, tuple[float, float]] = {}
    rows_spreads: dict[int, float] = {}
    if fused is not None and fused.usable():  # against the modules on plain F.linear weights where there is room
        plain = layout if _no_plain_copy(model, free_bytes) else WeightLayout(OUT_IN, OUT_IN, 0)
        if plain != layout:
            _store_plain_copy(model)

        def use_fused(on: bool) -> None:
            executor.fused, model.layout = (fused, layout) if on else (None, plain)

        fused_kept = timed.kept(FUSED_LAYERS, use_fused)
        use_fused(True)
        if fused_kept:
            model.use_layout(layout)
            if layout.small != OUT_IN:
                skipped[LAYOUT] = f"kept for the fused decode layers, which read its {fused.kind} weights"
            rows, rows_spreads = widest_fused_rows(step, fused, sweep_cap(step, plan))
        else:
            executor.fused = None
    elif fused is not None:
        skipped[FUSED_LAYERS] = f"the layout {layout.describe()} holds no panels to read"
    if layout.small != OUT_IN and executor.fused is None:
        why = _no_plain_copy(model, free_bytes)
        if why:
            skipped[LAYOUT] = why
        else:
            _store_plain_copy(model)
            plain = WeightLayout(OUT_IN, OUT_IN, 0)
            compiled, executor.compiled = executor.compiled, None  # the same kernels eager, without compiling twice
            layout_kept = timed.kept(LAYOUT, lambda on: setattr(model, "layout", layout if on else plain))
            executor.compiled = compiled
            model.use_layout(layout if layout_kept else plain)
    by_batch, again, memory_batch = {}, {}, None
    if sweep:
        memory_batch = sweep_cap(step, plan)
        by_batch = sweep_batches(step, plan)
        again = second_pass(step, by_batch, min(plan.max_num_seqs.value, memory_batch))
    share = step.share.share()
    how = (f"fastest of {ROUNDS} rounds of up to {STEPS} decode steps each, the two sides timed in turn, from "
           f"{context} tokens of context, batch 1" + (f" ({PAGED} batch {paged_batch})" if PAGED in candidates and
                                                       paged_batch > 1 else "")
           + "; weight layouts on the eager forward"
           + (f"; the timed threads had {share:.0%} of the CPU" if share is not None else ""))
    batch_spreads = {b: step.spreads[b] for b in by_batch if b in step.spreads}
    return DecodeTimings(candidates, by_batch, skipped, how, spreads, batch_spreads, again, memory_batch, share,
                         rows, rows_spreads)


def time_paths(timed: TimedCandidates, executor: Executor, plan: ExecutionPlan, beside_fused: bool) -> int:
    """The compiled forward, the paged decode kernel and the grouped expert path, each timed against its plain path
    and left on where it won; the batch paged decode was timed on. Beside the fused decode layers paged decode serves
    only the decode rows they do not (several beside prompts in a mixed step, batches past the kernel's rows), so it
    is timed on such a batch, as many sequences as the cache holds up to PAGED_BATCH."""
    model = executor.model
    paged_batch = max(1, min(PAGED_BATCH, sweep_cap(timed.step, plan))) if beside_fused else 1
    for name, owner, attribute, batch in ((COMPILED, executor, "compiled", 1),
                                          (PAGED, model, "decode_attend", paged_batch)):
        if getattr(owner, attribute) is not None:
            candidate = getattr(owner, attribute)
            on = timed.kept(name, lambda on, o=owner, a=attribute, c=candidate: setattr(o, a, c if on else None),
                            batch)
            setattr(owner, attribute, candidate if on else None)
    if plan.experts.value == GROUPED and sparse_blocks(model):
        grouped = timed.kept(EXPERTS, lambda on: use_expert_path(model, GROUPED if on else DENSE))
        use_expert_path(model, GROUPED if grouped else DENSE)
    return paged_batch


def widest_fused_rows(step: DecodeSteps, fused: FusedDecode, cap: int
                      ) -> tuple[dict[int, tuple[float, float]], dict[int, float]]:
    """Decode steps past the layout's switch through the fused decode layers and through the modules (the layout's
    large kind), at twice the switch, then doubling while the fused layers win, up to `cap` sequences; each pair
    ROWS_ROUNDS times in turn. The fused layers are left serving up to the largest batch they won."""
    pairs: dict[int, tuple[float, float]] = {}
    spreads: dict[int, float] = {}
    batch, fused.rows = 2 * max(1, fused.model.layout.switch_tokens), 0
    while fused.model.layout.switch_tokens and batch <= cap:
        won = fused.rows

        def use(on: bool, b: int = batch, w: int = won) -> None:
            fused.rows = b if on else w

        rounds: dict[bool, list[float]] = {True: [], False: []}
        for _, on in itertools.product(range(ROWS_ROUNDS), (False, True)):
            use(on)
            rounds[on].append(step.seconds(batch))
        pairs[batch] = min(rounds[True]), min(rounds[False])
        spreads[batch] = max(floor_noise(rounds[True]), floor_noise(rounds[False]))
        if not kept(*pairs[batch], spreads[batch]):
            fused.rows = won
            break
        fused.rows, batch = batch, 2 * batch
    return pairs, spreads


class TimedCandidates:
    """Each candidate timed against its plain path, with the floor noise of its repeated timings."""

    def __init__(self, step: DecodeSteps) -> None:
        self.step = step
        self.candidates: dict[str, tuple[float, float]] = {}
        self.spreads: dict[str, float] = {}

    def kept(self, name: str, use_candidate: Callable[[bool], None], batch: int = 1) -> bool:
        """Time `name` in turn with its plain path; whether it won beyond the noise (the caller switches it)."""
        candidate, plain, spread = timed_pair(self.step, use_candidate, batch)
        self.candidates[name], self.spreads[name] = (candidate, plain), spread
        return kept(candidate, plain, spread)


def alternated(step: DecodeSteps, use_candidate: Callable[[bool], None]) -> tuple[float, float]:
    """(candidate, plain) seconds per decode step (timed_pair without the noise)."""
    candidate, plain, _ = timed_pair(step, use_candidate)
    return candidate, plain


def timed_pair(step: DecodeSteps, use_candidate: Callable[[bool], None], batch: int = 1
               ) -> tuple[float, float, float]:
    """(candidate, plain, noise): plain and candidate timed in turn, ROUNDS times each, the fastest step of each
    side kept, so a machine warming up or a neighbour's burst does not favour one side; the noise is the larger of
    the two sides' floor noise across their rounds."""
    rounds: dict[bool, list[float]] = {True: [], False: []}
    for _, on in itertools.product(range(ROUNDS), (False, True)):
        use_candidate(on)
        rounds[on].append(step.seconds(batch))
    return min(rounds[True]), min(rounds[False]), max(floor_noise(rounds[True]), floor_noise(rounds[False]))


def second_pass(step: DecodeSteps, by_batch: dict[int, float], floor: int) -> dict[int, float]:
    """When the sweep's knee is below `floor`, the knee and the larger batches up to `floor` timed again: a limit
    below the default needs larger batches slower in two passes, not in one noisy second."""
    chosen = knee(by_batch).value if by_batch else floor
    if chosen >= floor:
        return {}
    return {b: step.seconds(b) for b in by_batch if chosen <= b <= floor}


def sweep_room(plan: ExecutionPlan) -> tuple[int, int]:
    """(sequences, tokens each) the batch sweep may use: MAX_BATCH sequences of its decode context."""
    return MAX_BATCH, sweep_context(plan) + STEPS + 2


def sweep_limit(plan: ExecutionPlan) -> int:
    """The largest batch a sweep on `plan` may time: what its KV cache holds of sweep_room's sequences, a step's
    token budget, MAX_BATCH (sweep_cap's answer, from the plan alone)."""
    per_seq = -(-sweep_room(plan)[1] // plan.block_size)
    return min(MAX_BATCH, plan.kv_blocks.value // per_seq, plan.max_num_batched_tokens.value)


def sweep_context(plan: ExecutionPlan) -> int:
    return max(1, min(CONTEXT, plan.max_model_len.value - STEPS - 2))


def sweep_batches(step: DecodeSteps, plan: ExecutionPlan) -> dict[int, float]:
    """Seconds per decode step at batch 1, 2, 4, ... until two doublings in a row gained under KNEE_GAIN (a
    plateau, not one bump), the cache is full, or the timed steps used SWEEP_BUDGET_S (a step that compiles for
    a new batch size is not timed, and does not count)."""
    cap = sweep_cap(step, plan)
    by_batch: dict[int, float] = {}
    timed_before, batch = step.timed_s, 1
    while batch <= cap:
        by_batch[batch] = step.seconds(batch)
        rates = [b / by_batch[b] for b in sorted(by_batch)[-3:]]
        if len(rates) == 3 and rates[1] < KNEE_GAIN * rates[0] and rates[2] < KNEE_GAIN * rates[1]:
            break
        if step.timed_s - timed_before > SWEEP_BUDGET_S:
            break
        batch *= 2
    return by_batch


def sweep_cap(step: DecodeSteps, plan: ExecutionPlan) -> int:
    """The largest batch the sweep may time: what the cache holds, a step's token budget, MAX_BATCH."""
    return min(MAX_BATCH, step.max_batch(plan), plan.max_num_batched_tokens.value)


def _store_plain_copy(model) -> None:  # type: ignore[no-untyped-def]
    """Also store the linear weights as F.linear's [out, in], for timing the plain path side by side."""
    model.add_kind(OUT_IN, next(k for k in model.layout.kinds if k in CONVERTIBLE))


def _no_plain_copy(model, free_bytes: int | None) -> str | None:  # type: ignore[no-untyped-def]
    if not any(k in CONVERTIBLE for k in model.layout.kinds):
        return f"{model.layout.describe()} weights cannot be converted to F.linear's for a side-by-side check"
    if free_bytes is None or free_bytes < 3 * model.weight_bytes():
        return "no room for a second copy of the weights to time F.linear side by side"
    return None


class DecodeSteps:
    """Real decode steps of `batch` sequences growing from `context` tokens, through the executor."""

    def __init__(self, executor: Executor, context: int, share: CpuShare | None = None,
                 interrupted: Callable[[], bool] | None = None) -> None:
        self.executor, self.context, self.interrupted = executor, context, interrupted
        self.share = share or CpuShare(is_host(executor.model.device))  # the CPU its timed steps got
        self.block_size = executor.plan.block_size
        self.blocks_per_seq = -(-(context + STEPS + 2) // self.block_size)
        self.tokens = [1] * (context + STEPS + 2)
        self.timed_s = 0.0  # seconds of every timed step so far
        self.spreads: dict[int, float] = {}  # batch size -> the largest floor noise of its steps so far

    def max_batch(self, plan: ExecutionPlan) -> int:
        return plan.kv_blocks.value // self.blocks_per_seq

    def seconds(self, batch: int) -> float:
        """The fastest step's seconds over up to STEPS steps (after one untimed step), within BUDGET_S."""
        tables = [list(range(i * self.blocks_per_seq, (i + 1) * self.blocks_per_seq)) for i in range(batch)]
        device = self.executor.model.device
        times: list[float] = []
        start = None  # the budget starts after the untimed step (which may compile for the new shape)
        for s in range(STEPS + 1):
            cached = self.context + s
            chunks = [SeqChunk(self.tokens[: cached + 1], cached, table) for table in tables]
            if self.interrupted is not None and self.interrupted():
                raise TimingInterrupted
            if start is not None:
                self.share.start()
            began = time.perf_counter()
            self.executor.run_chunks(chunks)
            synchronize(device)
            self.share.stop()
            if start is None:
                start = time.perf_counter()
            else:
                times.append(time.perf_counter() - began)
                if time.perf_counter() - start > BUDGET_S:
                    break
        log.debug("decode steps, batch %d: %s ms", batch, ", ".join(f"{t * 1e3:.2f}" for t in times))
        self.timed_s += sum(times)
        self.spreads[batch] = max(self.spreads.get(batch, 0.0), floor_noise(times))
        return min(times)
