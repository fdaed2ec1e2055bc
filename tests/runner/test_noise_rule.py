"""The timing rule a busy machine cannot fool (issue 36): floors of repetitions timed in turn, their noise from how
far the floors moved, the CPU share beside them, and a contended tune that does not replace a quiet record. Every
timing here is injected: the rule is checked on stated numbers, not on this machine's."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from bringup.profiles.sections.models import ModelPlanRecord
from bringup.runner.engine import decode_timing
from bringup.runner.engine.decode_timing import timed_pair
from bringup.runner.engine.reconfirm import why_reconfirm
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.host_kernels import FUSED_LAYERS, PAGED
from bringup.runner.plan.noise import contended, floor_noise, kept
from bringup.runner.plan.record.cleaner import cleaner_record


class BusyMachine:
    """Decode steps of a candidate path and its plain one, each `quiet` seconds on an idle machine, on a machine
    that a busy loop slows by `load` throughout and a neighbour's bursts slow further: of each side's ROUNDS
    rounds, two at random run without a burst (their fastest step within 3 % of quiet × load), the others up to
    `worst` times slower again. The sides are switched as timed_pair asks."""

    def __init__(self, quiet: dict[bool, float], seed: int, load: float = 1.6, worst: float = 4.0) -> None:
        self.quiet, self.load, self.on, rng = quiet, load, False, random.Random(seed)
        self.slowdowns = {}
        for side in (True, False):
            rounds = [rng.uniform(0.0, 0.03) for _ in range(2)]
            rounds += [rng.uniform(0.3, worst - 1) for _ in range(decode_timing.ROUNDS - 2)]
            rng.shuffle(rounds)
            self.slowdowns[side] = rounds

    def use(self, on: bool) -> None:
        self.on = on

    def seconds(self, batch: int) -> float:
        return self.quiet[self.on] * self.load * (1.0 + self.slowdowns[self.on].pop())


def test_floor_noise_is_how_far_the_two_fastest_repetitions_lie_apart():
    assert floor_noise([0.010]) == 0.0
    assert floor_noise([0.030, 0.010, 0.011, 0.050]) == pytest.approx(0.1)  # the slow ones do not count
    assert floor_noise([0.010, 0.010]) == 0.0


@pytest.mark.parametrize("seed", range(40))
def test_noisy_timings_never_choose_the_path_the_quiet_evidence_measured_slower(seed):
    """The fused decode layers take half the modules' time when quiet (or twice it); a busy loop and a neighbour's
    bursts slow the rounds by up to 6x. The candidate is kept where it is the faster one, never where it is the
    slower one."""
    slower = BusyMachine({True: 0.020, False: 0.010}, seed)
    candidate, plain, noise = timed_pair(slower, slower.use)
    assert not kept(candidate, plain, noise)

    faster = BusyMachine({True: 0.010, False: 0.020}, seed)
    candidate, plain, noise = timed_pair(faster, faster.use)
    assert kept(candidate, plain, noise)


def test_the_old_median_and_full_spread_rule_threw_the_fast_path_away_on_the_same_timings():
    """What the floors fix: the same rounds judged by their spread across all repetitions (slowest − fastest over
    the median, as before) keep the plain path that the quiet evidence measured 2x slower."""
    from bringup.runner.plan.noise import relative_spread

    machine = BusyMachine({True: 0.010, False: 0.020}, seed=3)
    rounds = {True: [], False: []}
    for _ in range(decode_timing.ROUNDS):
        for on in (False, True):
            machine.use(on)
            rounds[on].append(machine.seconds(1))
    spread = max(relative_spread(rounds[True]), relative_spread(rounds[False]))
    assert not kept(min(rounds[True]), min(rounds[False]), spread)  # the old rule: plain kept
    noise = max(floor_noise(rounds[True]), floor_noise(rounds[False]))
    assert kept(min(rounds[True]), min(rounds[False]), noise)  # the floors: the fast path kept


def record(share: float | None, tuned: str = "2026-12-01T00:00:00+00:00", sha: str = "ab" * 32) -> ModelPlanRecord:
    return ModelPlanRecord(model="m", source="built-in", model_sha256=sha, device="cpu", dtype="float32",
                           tuned=tuned, bringup="0", runs=3, plan={}, layout_times={1: {"in_out": 1e-6}},
                           layout_stream_bytes=1, paged_decode=False, paged_decode_evidence="", cpu_share=share)


def test_a_tune_on_a_contended_machine_keeps_the_earlier_record_timed_on_a_quiet_one():
    earlier, busy = record(0.98), record(0.62, tuned="2026-12-03T00:00:00+00:00")
    kept_record, why = cleaner_record(busy, earlier)
    assert kept_record is earlier
    assert why.startswith("this tune's timings ran on a contended machine (its timed threads had 62% of the CPU, "
                          "under 85%), while the record tuned at 2026-12-01T00:00:00+00:00 was timed with 98%")


@pytest.mark.parametrize("new, earlier", [
    (record(0.97), record(0.99)),  # both quiet: the new one
    (record(0.62), record(0.70)),  # both contended: the new one (nothing cleaner to keep)
    (record(0.62), record(None)),  # the earlier one's share is not known
    (record(0.62), None),  # nothing earlier
    (record(0.62), record(0.99, sha="cd" * 32)),  # other weights: its timings say nothing about these
])
def test_otherwise_the_new_record_replaces_the_earlier(new, earlier):
    assert cleaner_record(new, earlier) == (new, None)


def test_contended_means_under_85_percent_of_the_cpu_and_unknown_is_not_contended():
    assert contended(0.84) and not contended(0.85) and not contended(None)


def test_a_start_is_re_timed_at_idle_only_when_its_evidence_was_contended_or_inside_the_noise():
    clear = DecodeTimings({FUSED_LAYERS: (0.010, 0.020)}, spreads={FUSED_LAYERS: 0.05}, cpu_share=0.97)
    assert why_reconfirm(clear, replayed=False) is None
    assert why_reconfirm(replace(clear, cpu_share=0.6), replayed=False) == (
        "the start's timed threads had 60% of the CPU (under 85%: the machine was busy)")
    inside = DecodeTimings({PAGED: (0.008, 0.010)}, spreads={PAGED: 0.3}, cpu_share=0.97)
    assert why_reconfirm(inside, replayed=False) == "paged_decode lost to the plain path only inside the noise at " \
                                                    "the start"
    assert why_reconfirm(replace(clear, cpu_share=0.6), replayed=True) is None  # tune's record: trusted as recorded
    assert why_reconfirm(None, replayed=False) is None
