"""The timing harness: warm-up, then repetitions until stable (IQR/median under a threshold) or
out of time, with device synchronisation around every timed block and an optional cache flush."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from bringup.probes.bench.stats import SampleStats, summarize

StopReason = Literal["stable", "budget", "max_reps"]


@dataclass(frozen=True)
class HarnessSettings:
    """Knobs of the harness; recorded with the results so runs can be compared fairly."""

    warmup: int = 2  # untimed calls before calibration
    min_reps: int = 5  # repetitions always taken (down to 3 when that many would not fit the budget)
    max_reps: int = 1000  # hard cap
    rel_iqr_threshold: float = 0.05  # stop once IQR/median is at or under this
    budget_s: float = 2.0  # time budget per measurement (the min_reps are always taken)
    min_rep_s: float = 1e-3  # calibrate calls per repetition so one timed block lasts at least this
    flush_cache: bool = False  # flush the last-level cache before every repetition (one call per rep)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_changes(self, **changes: Any) -> HarnessSettings:
        return replace(self, **changes)


@dataclass(frozen=True)
class Timing:
    """Outcome of one measurement; times are seconds per call."""

    stats: SampleStats
    reps: int
    calls_per_rep: int
    stop: StopReason
    noisy: bool
    total_s: float
    samples: tuple[float, ...]

    @property
    def median_s(self) -> float:
        return self.stats.median

    @property
    def iqr_s(self) -> float:
        return self.stats.iqr

    @property
    def min_s(self) -> float:
        return self.stats.min


class Harness:
    """Times a zero-argument callable on a device.

    `sync` blocks until the device has finished queued work; pass
    `lambda: bringup.backends.registry.synchronize(device)` (see `Harness.for_device`), never a
    vendor-specific call. `flush` (optional) evicts the last-level cache; it runs before each
    repetition, outside the timed region, and forces one call per repetition.
    """

    def __init__(
        self,
        sync: Callable[[], None],
        settings: HarnessSettings | None = None,
        flush: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.sync = sync
        self.settings = settings or HarnessSettings()
        self.flush = flush if self.settings.flush_cache else None
        self.clock = clock

    @classmethod
    def for_device(cls, device: Any, settings: HarnessSettings | None = None,
                   flush: Callable[[], None] | None = None) -> Harness:
        """A harness that synchronises through the backend contract for `device`."""
        from bringup.backends.registry import synchronize

        return cls(lambda: synchronize(device), settings, flush)

    def _timed_block(self, fn: Callable[[], Any], calls: int) -> float:
        if self.flush is not None:
            self.flush()
        self.sync()
        start = self.clock()
        for _ in range(calls):
            fn()
        self.sync()
        return self.clock() - start

    def warm_up(self, fn: Callable[[], Any], count: int) -> float:
        """Untimed-for-results warm-up calls; returns the last call's time. A call that takes a quarter
        of the budget or more ends the warm-up early (its one-time costs are paid by then)."""
        per_call = 0.0
        for _ in range(count):
            per_call = self._timed_block(fn, 1)
            if per_call >= self.settings.budget_s / 4:
                break
        return per_call

    def calibrate(self, fn: Callable[[], Any]) -> int:
        """Run the warm-up calls and choose how many calls one timed repetition holds."""
        settings = self.settings
        per_call = self.warm_up(fn, max(1, settings.warmup))
        if self.flush is not None or per_call >= settings.min_rep_s:
            return 1
        calls = 1
        while calls * per_call < settings.min_rep_s and calls < 1_000_000:
            calls = max(calls + 1, math.ceil(settings.min_rep_s / max(per_call, 1e-9)))
            per_call = self._timed_block(fn, calls) / calls
        return calls

    def affordable_min_reps(self, block_s: float) -> int:
        """min_reps, lowered (never under 3) when that many blocks would not fit the budget."""
        settings = self.settings
        if block_s <= 0:
            return settings.min_reps
        fits = math.ceil(settings.budget_s / block_s)
        return max(min(3, settings.min_reps), min(settings.min_reps, fits))

    def measure(self, fn: Callable[[], Any], *, calls_per_rep: int | None = None) -> Timing:
        """Warm up, then time repetitions until stable, out of budget, or at max_reps."""
        settings = self.settings
        begin = self.clock()
        if calls_per_rep is None:
            calls = self.calibrate(fn)
        else:
            self.warm_up(fn, settings.warmup)
            calls = 1 if self.flush is not None else calls_per_rep
        samples: list[float] = []
        stop: StopReason = "max_reps"
        stats = None
        min_reps = settings.min_reps
        while len(samples) < settings.max_reps:
            samples.append(self._timed_block(fn, calls) / calls)
            if len(samples) == 1:
                min_reps = self.affordable_min_reps(samples[0] * calls)
            if len(samples) < min_reps:
                continue
            stats = summarize(samples)
            if stats.rel_iqr <= settings.rel_iqr_threshold:
                stop = "stable"
                break
            if self.clock() - begin >= settings.budget_s:
                stop = "budget"
                break
        stats = summarize(samples) if stats is None or stats.count != len(samples) else stats
        return Timing(
            stats=stats,
            reps=len(samples),
            calls_per_rep=calls,
            stop=stop,
            noisy=stats.rel_iqr > settings.rel_iqr_threshold,
            total_s=self.clock() - begin,
            samples=tuple(samples),
        )
