"""Where a late start-up decision's numbers come from (graphs, prefill chunk, prompt layers): given as data, a
replayed tune record that holds them, or measured here, and how the row says so."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TypeVar

from bringup.runner.engine.startup.context import Start

T = TypeVar("T")


def given_replayed_or_measured(start: Start, field: str, measure: Callable[[], T | None], replayable: bool = True
                               ) -> tuple[T | None, str]:
    """(the numbers for `field` of StartupMeasurements, how they were had): the options' measurements when they hold
    it, the replayed record's when it holds it and is `replayable` (an older record does not: measured), else
    `measure()`, timed. What was measured goes to the bench's measurements, for tune to record."""
    given = start.inputs.options.measurements
    if given is not None and getattr(given, field) is not None:
        return getattr(given, field), "given as data"
    bench = start.bench
    replayed = getattr(bench.measured, field) if replayable and bench.record is not None else None
    if replayed is not None and bench.record is not None:
        return replayed, f"from tune record {bench.key}, tuned {bench.record.tuned}"
    began = time.perf_counter()
    value = measure()
    if bench.measured is not None:
        bench.measured = replace(bench.measured, **{field: value})
    return value, f"measured at start-up in {time.perf_counter() - began:.2f} s"
