"""Several start-up measurements of one model combined into the one `bringup tune` records: the fastest of each
timing across the runs (interference only adds time, so a run slowed by a neighbour does not move the floor), its
floor noise across the runs (plan/noise.py) or the noise a run measured, whichever is larger, and the smallest share
of the CPU any run's timed threads got."""

from __future__ import annotations

from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.noise import floor_noise
from bringup.runner.plan.record.late_runs import combine_late


def combine(runs: list[StartupMeasurements]) -> tuple[StartupMeasurements, dict[str, float]]:
    """(the combined measurements, relative spread across the runs per timing). Needs at least one run."""
    noise: dict[str, float] = {}
    layouts = _layouts([r.layouts for r in runs])
    decode = _decode([r.decode or DecodeTimings() for r in runs], noise)
    paged = [r.paged_decode for r in runs]
    use_paged = all(use for use, _ in paged)  # a kernel is used only where it won every time
    evidence = next((why for use, why in paged if use == use_paged), paged[0][1])
    if len(runs) > 1:
        evidence = f"{'faster' if use_paged else 'not faster'} in {sum(u for u, _ in paged)} of {len(runs)} runs; " \
                   f"{evidence}"
    return StartupMeasurements(layouts=layouts, paged_decode=(use_paged, evidence), free_bytes=runs[-1].free_bytes,
                               decode=decode, fused_decode=all(r.fused_decode for r in runs),
                               **combine_late(runs, noise)), noise


def _layouts(runs: list[LayoutTimings]) -> LayoutTimings:
    rows = [m for m in runs[0].times if all(m in r.times for r in runs)]
    times = {m: {kind: min(r.times[m][kind] for r in runs) for kind in runs[0].times[m]
                 if all(kind in r.times[m] for r in runs)} for m in rows}
    skipped = {kind: why for r in runs for kind, why in r.skipped.items()}
    spreads = {m: {kind: floor_noise([r.times[m][kind] for r in runs]) for kind in row} for m, row in times.items()}
    return LayoutTimings(times, skipped, runs[0].stream_bytes, spreads)


def _decode(runs: list[DecodeTimings], noise: dict[str, float]) -> DecodeTimings:
    candidates, spreads = {}, {}
    for name in runs[0].candidates:
        pairs = [r.candidates[name] for r in runs if name in r.candidates]
        candidates[name], spreads[name] = _fastest_pair(pairs, [r.spreads.get(name, 0.0) for r in runs], noise, name)
    by_batch, batch_spreads = _by_batch([r.by_batch for r in runs], [r.batch_spreads for r in runs], noise)
    again, _ = _by_batch([r.by_batch_again for r in runs if r.by_batch_again], [], {})
    memory = [r.memory_batch for r in runs if r.memory_batch is not None]
    skipped = {name: why for r in runs for name, why in r.skipped.items() if name not in candidates}
    shares = [r.cpu_share for r in runs if r.cpu_share is not None]
    how = f"fastest of {len(runs)} start-up runs, each {runs[0].how}" if len(runs) > 1 else runs[0].how
    rows, rows_spreads = _fused_rows(runs, noise)
    return DecodeTimings(candidates, by_batch, skipped, how, spreads, batch_spreads, again,
                         min(memory) if memory else None, min(shares) if shares else None, rows, rows_spreads)


def _fused_rows(runs: list[DecodeTimings], noise: dict[str, float]
                ) -> tuple[dict[int, tuple[float, float]], dict[int, float]]:
    """The fused decode layers against the modules past the layout's switch: each batch every run timed, the
    fastest of each side (a batch only some runs reached, their doubling having stopped, is left out: the
    record keeps what every run agreed to time); each batch's noise."""
    common = set.intersection(*(set(r.fused_rows) for r in runs)) if runs else set()
    rows, spreads = {}, {}
    for b in sorted(common):
        rows[b], spreads[b] = _fastest_pair([r.fused_rows[b] for r in runs],
                                            [r.fused_rows_spreads.get(b, 0.0) for r in runs], noise, f"fused rows {b}")
    return rows, spreads


def _fastest_pair(pairs: list[tuple[float, float]], run_spreads: list[float], noise: dict[str, float], key: str
                  ) -> tuple[tuple[float, float], float]:
    """A (candidate, plain) timing across the runs: the fastest of each side, and its spread (the floor noise
    across the runs, noted under `key`, or the largest a run measured)."""
    across = max(floor_noise([c for c, _ in pairs]), floor_noise([p for _, p in pairs]))
    noise[key] = across
    return (min(c for c, _ in pairs), min(p for _, p in pairs)), max([across, *run_spreads])


def _by_batch(runs: list[dict[int, float]], run_spreads: list[dict[int, float]], noise: dict[str, float]
              ) -> tuple[dict[int, float], dict[int, float]]:
    """Seconds per step by batch, the fastest of the runs that timed each size; each size's noise."""
    sizes = sorted({b for r in runs for b in r})
    by_batch, spreads = {}, {}
    for b in sizes:
        seconds = [r[b] for r in runs if b in r]
        by_batch[b] = min(seconds)
        noise[f"batch {b}"] = floor_noise(seconds)
        spreads[b] = max([floor_noise(seconds), *(s.get(b, 0.0) for s in run_spreads)])
    return by_batch, spreads
