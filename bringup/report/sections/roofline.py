"""Roofline data: measured points (rate at arithmetic intensity) and the ceilings they sit under.

A point is any bench record with both a TFLOP/s rate and an intensity (FLOP/byte): matmuls per dtype,
attention, and the bandwidth kernels that do arithmetic (copy does none, so it has no point).
Ceilings: the best compute rate per dtype and the best bandwidth this run measured, and the datasheet's
peaks when the profile matched one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.profiles.sections.bench import BenchSection

POINT_GROUPS = ("matmul", "bandwidth", "attention")


@dataclass
class Point:
    group: str
    key: str
    dtype: str
    intensity: float  # FLOP/byte
    tflops: float


@dataclass
class Ceilings:
    source: str  # measured | datasheet
    compute: dict[str, float]  # dtype -> TFLOP/s
    bandwidth_gbps: float | None
    label: str  # what these ceilings are
    bandwidth_kernel: str | None = None  # the kernel that measured the bandwidth ceiling (measured only)
    sheet_name: str | None = None  # the datasheet's device name (datasheet only)

    def where(self) -> str:
        """`measured in this run` or `datasheet <device>`: the words the bench tables name a ceiling with."""
        return "measured in this run" if self.source == "measured" else f"datasheet {self.sheet_name or ''}".rstrip()


@dataclass
class Roofline:
    points: list[Point] = field(default_factory=list)
    ceilings: list[Ceilings] = field(default_factory=list)
    datasheet_note: str | None = None  # why there is no datasheet line, when there is none

    @property
    def drawable(self) -> bool:
        return bool(self.points)


def points(section: BenchSection) -> list[Point]:
    found = []
    for group in POINT_GROUPS:
        for r in section.records(group):
            if r.status == "ok" and r.tflops and r.intensity and r.tflops > 0 and r.intensity > 0:
                found.append(Point(group, r.key, r.dtype or "?", r.intensity, r.tflops))
    return found


def roofline(section: BenchSection | None) -> Roofline:
    if section is None:
        return Roofline()
    ceilings = []
    measured = section.ceilings
    if measured is not None and (measured.tflops or measured.gbps):
        kernel = f" ({measured.gbps_kernel})" if measured.gbps_kernel else ""
        ceilings.append(Ceilings("measured", dict(measured.tflops), measured.gbps,
                                 f"measured in this run: best matmul per dtype, best bandwidth{kernel}",
                                 bandwidth_kernel=measured.gbps_kernel))
    sheet = section.datasheet
    if sheet is not None:
        ceilings.append(Ceilings("datasheet", dict(sheet.dense_tflops), sheet.memory_bandwidth_gbps,
                                 f"datasheet: {sheet.name} ({sheet.source})", sheet_name=sheet.name))
    return Roofline(points(section), ceilings, section.datasheet_reason if sheet is None else None)
