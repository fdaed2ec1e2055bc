"""The quantized kernels in the matmul group: exact bytes and FLOPs per record, the float baseline beside each,
kernels the probe did not prove left out with the reason, and their place on the roofline."""

from __future__ import annotations

import pytest
import torch

from bringup.probes.bench.accounting import scaled_matmul_work, weight_only_work
from bringup.probes.bench.groups import matmul
from bringup.probes.bench.roofline import apply_roofline
from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection

# the tiny preset's decoder (tests/probes/bench/conftest.py): hidden 64, intermediate 128, 4 heads, 2 kv heads
TINY_GEMMS = {"qkv": (64, 128), "o": (64, 64), "gate_up": (64, 256), "down": (128, 64)}


def test_weight_only_and_scaled_work_count_packed_weights_and_their_scales():
    # int8: x [1,64] f32 + y [1,4] f32 = 272 bytes, weights 4x64 int8 = 256, scales 4 x f32 = 16
    assert weight_only_work(1, 4, 64, 4, 8, 16).bytes == 544 and weight_only_work(1, 4, 64, 4, 8, 16).flops == 512
    # int4: the weights take half a byte each (128), scales and zeros per group of 32 in bf16: 2 x 2 x 4 x 2 = 32
    assert weight_only_work(1, 4, 64, 2, 4, 32).bytes == 2 * (64 + 4) + 128 + 32
    # _int_mm: int8 A [8,64] and B [64,16], int32 C [8,16]; no scales
    assert scaled_matmul_work(8, 16, 64, 1, 4, 0).bytes == 8 * 64 + 64 * 16 + 4 * 8 * 16
    assert scaled_matmul_work(8, 16, 64, 1, 4, 8).flops == 2 * 8 * 16 * 64


def expected_bytes(kernel: str, m: int, k: int, n: int) -> float:
    if kernel == "_weight_int8pack_mm":
        return 4 * (m * k + m * n) + n * k + 4 * n
    if kernel.startswith("_weight_int4pack_mm"):
        group = 128 if k % 128 == 0 else 64
        return 4 * (m * k + m * n) + n * k // 2 + 2 * (k // group) * n * 4
    return m * k + k * n + 4 * m * n + (8 if kernel == "_scaled_mm" else 0)


@pytest.fixture(scope="module")
def quantized_records():
    from tests.probes.bench.conftest import make_context

    group = matmul.run(make_context())
    return group.records, [r for r in group.records if r.params.get("kind") == "quantized"]


def test_every_kernel_at_gemv_and_gemm_for_every_decoder_gemm(quantized_records):
    _all, records = quantized_records
    kernels = {"_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu", "_weight_int4pack_mm", "_int_mm", "_scaled_mm"}
    assert {r.name for r in records} == kernels
    for name in kernels:
        shapes = {(r.params["gemm"], r.params["m"]) for r in records if r.name == name}
        assert shapes == {(gemm, m) for gemm in TINY_GEMMS for m in (1, 8)}, name
    for r in records:
        assert r.status in ("ok", "not_applicable"), (r.key, r.reason)
        assert r.status == "ok" or r.reason  # a kernel this torch or device lacks says why


def test_records_carry_exact_bytes_and_flops(quantized_records):
    _all, records = quantized_records
    measured = [r for r in records if r.status == "ok"]
    assert measured
    for r in measured:
        m, k, n = r.params["m"], r.params["k"], r.params["n"]
        assert (k, n) == TINY_GEMMS[r.params["gemm"]]
        assert r.flops == 2 * m * n * k
        assert r.bytes == expected_bytes(r.name, m, k, n), r.key
        assert r.gbps == pytest.approx(r.bytes / r.median_s / 1e9)
        assert r.dtype == {"_int_mm": "int8", "_scaled_mm": "float8_e4m3fn"}.get(r.name, r.dtype)
        if r.name.startswith("_weight_int4"):
            assert r.dtype == "int4" and r.params["group"] == (128 if k % 128 == 0 else 64)


def test_weight_only_kernels_stand_beside_the_float_matmul_of_their_shape(quantized_records):
    everything, records = quantized_records
    by_key = {r.key: r for r in everything}
    weight_only = [r for r in records if r.status == "ok" and r.name.startswith("_weight_")]
    if not weight_only:
        pytest.skip(f"this torch ({torch.__version__}) has no weight-only quantized kernel on the CPU")
    for r in weight_only:
        baseline = by_key[r.baseline_key]
        assert (baseline.params["m"], baseline.params["k"], baseline.params["n"]) == (r.params["m"], r.params["k"],
                                                                                      r.params["n"])
        assert baseline.dtype == r.params["compute_dtype"] == "float32"
        assert ("F.linear" in baseline.key) == (r.params["m"] == 1)
        assert r.speedup == pytest.approx(baseline.min_s / r.min_s)


def test_kernels_the_probe_did_not_prove_are_not_timed(context_for):
    caps = Capabilities(
        dtypes={"float32": Capability(status="supported", evidence="x"),
                "int8": Capability(status="unsupported", reason="y")},
        features={"int8_weight_only_matmul": Capability(status="supported", evidence="x"),
                  "int4_weight_only_matmul": Capability(status="unsupported", reason="wrong numbers")})
    group = matmul.run(context_for(Profile(capabilities=caps)))
    quantized = [r for r in group.records if r.params.get("kind") == "quantized"]
    skipped = {r.name: r.reason for r in quantized if r.status == "skipped"}
    assert "capabilities.features.int4_weight_only_matmul is unsupported" in skipped["_weight_int4pack_mm_for_cpu"]
    assert "capabilities.dtypes.int8 is unsupported" in skipped["_int_mm"]
    assert "capabilities.features.fp8_scaled_mm is not probed" in skipped["_scaled_mm"]
    assert "_weight_int8pack_mm" not in skipped


def record(key: str, dtype: str, seconds: float, flops: float, nbytes: float, **params) -> BenchRecord:
    return BenchRecord(key=key, name=key, dtype=dtype, params=params, median_s=seconds, iqr_s=0.0, min_s=seconds,
                       reps=5, flops=flops, bytes=nbytes, tflops=flops / seconds / 1e12, gbps=nbytes / seconds / 1e9)


def test_int4_decode_is_placed_against_the_memory_ceiling_and_sets_no_compute_ceiling():
    section = BenchSection(groups={
        "matmul": BenchGroup(records=[
            record("float32 square", "float32", 1.0, 2e12, 1e9),
            # int4 GEMV: 1e8 bytes in 1 ms = 100 GB/s, of the 200 GB/s ceiling: 50 %; computing in float32
            record("int4 gemv", "int4", 1e-3, 2e8, 1e8, compute_dtype="float32"),
            record("int4 gemm", "int4", 1e-3, 1e12, 1e8, compute_dtype="float32"),  # would be 1000 TFLOP/s
        ]),
        "bandwidth": BenchGroup(records=[record("triad", "float32", 1.0, 0.0, 2e11)]),
    })
    apply_roofline(section, "no such device")
    assert section.ceilings.tflops == {"float32": 2.0}  # the weight-only records set no ceiling of their own
    _square, gemv, gemm = section.records("matmul")
    assert gemv.pct_measured == 50.0 and gemv.bound == "memory"
    assert gemm.bound == "compute" and gemm.pct_measured == 50000.0  # against float32's 2 TFLOP/s
