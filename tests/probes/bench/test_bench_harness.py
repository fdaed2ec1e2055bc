"""The harness on real CPU work: stops once stable, flags noise, synchronises, flushes."""

from __future__ import annotations

import random
import time

import torch

from bringup.backends.cpu import CpuBackend
from bringup.probes.bench.cache import CacheFlusher
from bringup.probes.bench.harness import Harness, HarnessSettings
from bringup.probes.bench.stats import summarize


class CountingCpuBackend(CpuBackend):
    """The real CPU backend, counting how often it is asked to synchronise."""

    def __init__(self) -> None:
        self.sync_calls = 0

    def synchronize(self, device: torch.device) -> None:
        self.sync_calls += 1
        super().synchronize(device)


def test_summary_statistics_are_exact():
    stats = summarize([4.0, 1.0, 3.0, 2.0, 5.0])
    assert (stats.median, stats.q1, stats.q3, stats.min, stats.count) == (3.0, 2.0, 4.0, 1.0, 5)
    assert stats.iqr == 2.0 and abs(stats.rel_iqr - 2 / 3) < 1e-12


def test_repetition_stops_once_stable():
    settings = HarnessSettings(warmup=1, min_reps=5, max_reps=2000, rel_iqr_threshold=0.5, budget_s=30.0)
    timing = Harness(lambda: None, settings).measure(lambda: time.sleep(0.002), calls_per_rep=1)
    assert timing.stop == "stable"
    assert settings.min_reps <= timing.reps < settings.max_reps
    assert not timing.noisy
    assert timing.stats.rel_iqr <= settings.rel_iqr_threshold
    assert timing.median_s >= 0.002  # it slept at least that long per call


def test_jittery_function_is_flagged_noisy_and_runs_out_of_budget():
    rng = random.Random(0)
    settings = HarnessSettings(warmup=1, min_reps=20, max_reps=10_000, rel_iqr_threshold=0.05, budget_s=0.3)
    timing = Harness(lambda: None, settings).measure(lambda: time.sleep(rng.uniform(0.0005, 0.004)),
                                                     calls_per_rep=1)
    assert timing.noisy
    assert timing.stop == "budget"
    assert timing.stats.rel_iqr > settings.rel_iqr_threshold
    assert timing.reps >= settings.min_reps


def test_max_reps_caps_the_repetitions():
    settings = HarnessSettings(warmup=0, min_reps=3, max_reps=7, rel_iqr_threshold=0.0, budget_s=60.0)
    timing = Harness(lambda: None, settings).measure(lambda: time.sleep(0.0002 * random.random()),
                                                     calls_per_rep=1)
    assert timing.reps == 7 and timing.stop == "max_reps"


def test_every_timed_block_is_synchronised_through_the_backend():
    backend, device = CountingCpuBackend(), torch.device("cpu")
    settings = HarnessSettings(warmup=2, min_reps=4, max_reps=50, rel_iqr_threshold=1.0, budget_s=5.0)
    harness = Harness(lambda: backend.synchronize(device), settings)
    a = torch.randn(64, 64)
    timing = harness.measure(lambda: a @ a, calls_per_rep=3)
    # one sync before and one after each warm-up call and each timed repetition
    assert backend.sync_calls == 2 * (settings.warmup + timing.reps)
    assert timing.calls_per_rep == 3


def test_calibration_also_synchronises_and_batches_short_calls():
    backend, device = CountingCpuBackend(), torch.device("cpu")
    settings = HarnessSettings(warmup=1, min_reps=3, max_reps=30, rel_iqr_threshold=1.0, min_rep_s=2e-3)
    timing = Harness(lambda: backend.synchronize(device), settings).measure(lambda: None)
    assert timing.calls_per_rep > 1  # a no-op is far below 2 ms: many calls per timed block
    assert backend.sync_calls >= 2 * (timing.reps + 1) and backend.sync_calls % 2 == 0


def test_cache_flush_runs_before_every_repetition_with_one_call_each():
    flushes = []
    settings = HarnessSettings(warmup=2, min_reps=4, max_reps=8, rel_iqr_threshold=1.0, flush_cache=True)
    flusher = CacheFlusher(torch.device("cpu"), 1 << 20)
    harness = Harness(lambda: None, settings, flush=lambda: (flushes.append(1), flusher()))
    timing = harness.measure(lambda: None)
    assert timing.calls_per_rep == 1
    assert len(flushes) == settings.warmup + timing.reps
    assert flusher.buffer.numel() * 4 == 1 << 20
    assert float(flusher.buffer[0]) == len(flushes)  # the buffer really was read and written each time


def test_flush_is_ignored_unless_enabled():
    flushes = []
    harness = Harness(lambda: None, HarnessSettings(min_reps=3, max_reps=3), flush=lambda: flushes.append(1))
    harness.measure(lambda: None, calls_per_rep=1)
    assert flushes == []


def test_long_calls_take_fewer_warm_ups_and_repetitions_within_the_budget():
    settings = HarnessSettings(warmup=3, min_reps=7, max_reps=100, rel_iqr_threshold=0.0, budget_s=0.1)
    calls = []
    timing = Harness(lambda: None, settings).measure(lambda: (calls.append(1), time.sleep(0.05)), calls_per_rep=1)
    # one warm-up (0.05 s >= budget/4), then 3 repetitions: 7 would not fit a 0.1 s budget
    assert timing.reps == 3 and len(calls) == 4 and timing.stop == "budget"
