"""Roofline percentages against datasheet peaks and measured ceilings; the bundled peaks table."""

from __future__ import annotations

import pytest

from bringup.probes.bench.roofline import apply_roofline
from bringup.profiles.peaks import find_peaks, load_peaks
from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection


def rec(key: str, name: str, dtype: str, median: float, flops: float, nbytes: float) -> BenchRecord:
    return BenchRecord(key=key, name=name, dtype=dtype, median_s=median, iqr_s=0.0, min_s=median, reps=5,
                       flops=flops, bytes=nbytes, tflops=flops / median / 1e12 if flops else None,
                       gbps=nbytes / median / 1e9)


def sample_section() -> BenchSection:
    return BenchSection(groups={
        "matmul": BenchGroup(records=[rec("big", "matmul", "bfloat16", 1.0, 500e12, 1e9),
                                      rec("gemv", "matmul", "bfloat16", 1e-3, 2e9, 1e9)]),
        "bandwidth": BenchGroup(records=[rec("triad", "triad", "float32", 1.0, 2e11, 2e12)]),
    })


def test_percent_of_measured_ceilings():
    section = sample_section()
    apply_roofline(section, "AMD EPYC")
    assert section.ceilings.tflops == {"bfloat16": 500.0}
    assert section.ceilings.gbps == 2000.0 and section.ceilings.gbps_kernel == "triad"
    big, gemv = section.records("matmul")
    assert big.pct_measured == 100.0 and big.bound == "compute"
    # gemv: 1e9 bytes at the measured 2000 GB/s take 0.5 ms of its 1 ms
    assert gemv.pct_measured == 50.0 and gemv.bound == "memory"
    assert section.datasheet is None and "AMD EPYC" in section.datasheet_reason
    assert gemv.pct_datasheet is None


def test_percent_of_datasheet_peaks_for_a_known_device():
    section = sample_section()
    apply_roofline(section, "NVIDIA H100 80GB HBM3")
    assert section.datasheet.id == "nvidia-h100-sxm" and "datasheet" in section.datasheet.source
    big, gemv = section.records("matmul")
    assert big.pct_datasheet == pytest.approx(100 * 500 / 989.5, abs=0.01)
    assert gemv.pct_datasheet == pytest.approx(100 * (1e9 / 3350e9) / 1e-3, abs=0.01)
    assert gemv.bound == "memory"


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"), ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),
    ("NVIDIA H200", "nvidia-h200-sxm"), ("NVIDIA A100-SXM4-80GB", "nvidia-a100-80gb-sxm"),
    ("NVIDIA L40S", "nvidia-l40s"), ("NVIDIA L4", "nvidia-l4"), ("AMD Instinct MI300X", "amd-mi300x"),
    ("AMD Instinct MI250X", "amd-mi250x"), ("GAUDI2", "intel-gaudi2"), ("Intel Gaudi 3", "intel-gaudi3"),
    ("AMD EPYC 7B13", None), ("", None),
])
def test_device_names_match_datasheet_entries(name, expected):
    found = find_peaks(name)
    assert (found.id if found else None) == expected


def test_every_peaks_entry_names_its_source_and_has_positive_figures():
    table = load_peaks()
    assert len({e.id for e in table.devices}) == len(table.devices) >= 15
    for entry in table.devices:
        assert entry.source.strip() and entry.memory_bandwidth_gbps > 0 and entry.dense_tflops
        assert all(v > 0 for v in entry.dense_tflops.values()), entry.id
        if "bfloat16" in entry.dense_tflops and "float32" in entry.dense_tflops:
            assert entry.dense_tflops["bfloat16"] >= entry.dense_tflops["float32"], entry.id


def test_attention_faster_than_matmul_raises_the_compute_ceiling_not_the_matmul_one():
    section = sample_section()
    section.groups["attention"] = BenchGroup(records=[rec("flash", "sdpa_flash", "bfloat16", 1.0, 800e12, 1e9)])
    apply_roofline(section, None)
    assert section.ceilings.tflops == {"bfloat16": 500.0}  # what the runner reads: matmul only
    assert section.ceilings.attention_tflops == {"bfloat16": 800.0}
    assert section.records("attention")[0].pct_measured == 100.0
    assert section.records("matmul")[0].pct_measured == 62.5  # 500 of the 800 TFLOP/s ceiling
