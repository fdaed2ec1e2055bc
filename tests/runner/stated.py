"""Start-up measurements given as data, so planning tests state the numbers they depend on."""

from __future__ import annotations

from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.plan.measurements import StartupMeasurements

GIB = 2**30
ROWS = (1, 2, 4, 8, 16, 32, 64, 256)


def layout_times(**per_row_kind: float) -> LayoutTimings:
    """Every row count gives each named kind the stated microseconds per row (in_out=2.0, out_in=1.0)."""
    return LayoutTimings({m: {kind: us * m * 1e-6 for kind, us in per_row_kind.items()} for m in ROWS})


def stated(layouts: LayoutTimings | None = None, paged_decode: tuple[bool, str] | None = None,
           free_bytes: int | None = 16 * GIB, decode: DecodeTimings | None = None) -> StartupMeasurements:
    """Plain F.linear wins every row count, no paged decode kernel, 16 GiB free, the draft plan not checked on
    the model's decode steps: unless told otherwise."""
    return StartupMeasurements(layouts=layouts or layout_times(in_out=2.0, out_in=1.0),
                               paged_decode=paged_decode or (False, "not measured: given as data"),
                               free_bytes=free_bytes, decode=decode)
