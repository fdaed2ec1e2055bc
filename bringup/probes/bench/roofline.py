"""Roofline: for each measurement with FLOP/byte accounting, its arithmetic intensity and the share
of the attainable ceiling it reached — against datasheet peaks (when the device is in peaks.yaml)
and always against the ceilings this run measured (best matmul or attention TFLOP/s per dtype,
best bandwidth-kernel GB/s).

Attainable time = max(FLOPs / peak FLOP/s, bytes / peak bandwidth); % = attainable / measured time.
Transfers are excluded: their ceiling is the host link, not device memory.
"""

from __future__ import annotations

from bringup.backends.registry import peaks_files
from bringup.profiles.peaks import DevicePeaks, find_peaks
from bringup.profiles.sections.bench import BenchRecord, BenchSection, DatasheetRef, MeasuredCeilings

ROOFLINE_GROUPS = ("matmul", "bandwidth", "attention")


def compute_dtype(record: BenchRecord) -> str:
    """The dtype a record computes in: a weight-only quantized kernel's activations, else its own dtype."""
    return record.params.get("compute_dtype") or record.dtype or "float32"


def best_tflops(section: BenchSection, groups: tuple[str, ...]) -> dict[str, float]:
    """Best TFLOP/s per dtype; a weight-only kernel (stored in one dtype, computing in another) sets no ceiling."""
    best: dict[str, float] = {}
    for group in groups:
        for record in section.records(group):
            if record.status == "ok" and record.tflops and record.dtype and compute_dtype(record) == record.dtype:
                best[record.dtype] = max(best.get(record.dtype, 0.0), record.tflops)
    return best


def measured_ceilings(section: BenchSection) -> MeasuredCeilings:
    ceilings = MeasuredCeilings()
    ceilings.tflops = best_tflops(section, ("matmul",))
    ceilings.attention_tflops = best_tflops(section, ("attention",))
    for record in section.records("bandwidth"):
        if record.status == "ok" and record.gbps and (ceilings.gbps is None or record.gbps > ceilings.gbps):
            ceilings.gbps, ceilings.gbps_kernel = record.gbps, record.name
    return ceilings


def attainable(record: BenchRecord, peak_tflops: float | None, peak_gbps: float | None
               ) -> tuple[float, str] | None:
    """(attainable seconds per call, bound) under these ceilings, or None when a needed one is missing."""
    flops, nbytes = record.flops or 0.0, record.bytes or 0.0
    compute = memory = 0.0
    if flops:
        if not peak_tflops:
            return None
        compute = flops / (peak_tflops * 1e12)
    if nbytes:
        if not peak_gbps:
            return None
        memory = nbytes / (peak_gbps * 1e9)
    if not flops and not nbytes:
        return None
    return (compute, "compute") if compute >= memory else (memory, "memory")


def percent_of(record: BenchRecord, peak_tflops: float | None, peak_gbps: float | None) -> tuple[float, str] | None:
    found = attainable(record, peak_tflops, peak_gbps)
    if found is None or not record.median_s:
        return None
    seconds, bound = found
    return 100.0 * seconds / record.median_s, bound


def datasheet_for(device_name: str | None) -> tuple[DevicePeaks | None, str | None]:
    peaks = find_peaks(device_name, backend_files=peaks_files())
    if peaks is None:
        return None, (f"no datasheet entry matches {device_name!r} in bringup/profiles/peaks.yaml or a "
                      "backend's own peaks file; "
                      "percentages are of this run's measured ceilings only")
    return peaks, None


def apply_roofline(section: BenchSection, device_name: str | None) -> None:
    """Fill ceilings, datasheet reference and per-record roofline fields, in place."""
    ceilings = measured_ceilings(section)
    section.ceilings = ceilings
    peaks, reason = datasheet_for(device_name)
    section.datasheet = None if peaks is None else DatasheetRef(
        id=peaks.id, name=peaks.name, source=peaks.source,
        memory_bandwidth_gbps=peaks.memory_bandwidth_gbps, dense_tflops=peaks.dense_tflops)
    section.datasheet_reason = reason
    for group in ROOFLINE_GROUPS:
        for record in section.records(group):
            if record.status != "ok":
                continue
            dtype = compute_dtype(record)
            compute = max(ceilings.tflops.get(dtype, 0.0), ceilings.attention_tflops.get(dtype, 0.0)) or None
            found = percent_of(record, compute, ceilings.gbps)
            record.pct_measured = round(found[0], 2) if found else None
            record.bound = found[1] if found else None
            if peaks is not None:
                sheet = percent_of(record, peaks.tflops_for(dtype), peaks.memory_bandwidth_gbps)
                record.pct_datasheet = round(sheet[0], 2) if sheet else None
                record.bound = sheet[1] if sheet else record.bound
