"""FLOP and byte accounting per kernel, exact from shapes, and carried into the records."""

from __future__ import annotations

import torch

from bringup.probes.bench.accounting import matmul_work, sdpa_work, stream_work, transfer_work
from bringup.probes.bench.cache import cpu_llc_from_sysfs, parse_size
from bringup.probes.bench.groups import attention, bandwidth, matmul
from bringup.probes.bench.sizing import RateTracker, too_big_reason, too_slow_reason


def test_matmul_counts_two_flops_per_term_and_each_operand_once():
    work = matmul_work(m=4, n=5, k=6, elem_bytes=2)
    assert work.flops == 2 * 4 * 5 * 6 == 240
    assert work.bytes == 2 * (4 * 6 + 6 * 5 + 4 * 5) == 148
    assert work.intensity == 240 / 148


def test_stream_kernels_count_bytes_the_babelstream_way():
    n = 1000
    expected = {"copy": (0, 2), "scale": (1, 2), "add": (1, 3), "triad": (2, 3), "dot": (2, 2)}
    for kernel, (flops_per_elem, arrays) in expected.items():
        work = stream_work(kernel, n, 4)
        assert work.flops == flops_per_elem * n, kernel
        assert work.bytes == arrays * n * 4, kernel


def test_sdpa_counts_two_gemms_and_halves_for_causal():
    full = sdpa_work(batch=2, heads=3, q_len=8, kv_len=16, head_dim=4, elem_bytes=2, causal=False)
    assert full.flops == 4 * 2 * 3 * 8 * 16 * 4
    assert full.bytes == 2 * (2 * 3 * 4 * (2 * 8 + 2 * 16))
    causal = sdpa_work(batch=2, heads=3, q_len=8, kv_len=16, head_dim=4, elem_bytes=2, causal=True)
    assert causal.flops == full.flops / 2 and causal.bytes == full.bytes


def test_transfer_moves_its_bytes_once():
    assert transfer_work(4096).bytes == 4096 and transfer_work(4096).intensity == 0.0


def test_bandwidth_records_carry_exact_bytes_and_rates(tiny_context):
    group = bandwidth.run(tiny_context)
    n = tiny_context.llc.bytes // 4  # stream_llc_multiple = 1, float32
    by_name = {r.name: r for r in group.records}
    assert set(by_name) == {"copy", "scale", "add", "triad", "dot"}
    for name, arrays in {"copy": 2, "scale": 2, "add": 3, "triad": 3, "dot": 2}.items():
        record = by_name[name]
        assert record.status == "ok" and record.params["elements"] == n
        assert record.bytes == arrays * n * 4
        assert abs(record.gbps - record.bytes / record.median_s / 1e9) < 1e-9 * record.gbps


def test_bandwidth_kernels_compute_the_babelstream_results():
    a, b, c = torch.full((8,), 0.1), torch.full((8,), 0.2), torch.zeros(8)
    kernels = bandwidth.kernels(a, b, c)
    kernels["copy"]()
    assert torch.equal(c, a)
    kernels["scale"]()
    assert torch.allclose(b, 0.4 * c)
    kernels["add"]()
    assert torch.allclose(c, a + b)
    expected_a = b + 0.4 * c
    kernels["triad"]()
    assert torch.allclose(a, expected_a)
    assert torch.allclose(kernels["dot"](), (a * b).sum())


def test_matmul_records_carry_exact_flops(tiny_context):
    group = matmul.run(tiny_context)
    square = next(r for r in group.records if r.key == "float32 square 64")
    assert square.flops == 2 * 64**3 and square.bytes == 4 * 3 * 64 * 64
    assert abs(square.tflops - square.flops / square.median_s / 1e12) < 1e-9 * square.tflops
    gate_up = next(r for r in group.records if r.key == "float32 gate_up 64x256 M=8")
    assert gate_up.flops == 2 * 8 * 64 * 256  # K=hidden, N=2*intermediate
    linear = next(r for r in group.records if r.name == "linear")
    assert linear.baseline_key.endswith("M=1") and linear.speedup > 0
    assert any("float32 only" in note for note in group.notes)


def test_attention_records_carry_exact_flops(tiny_context):
    group = attention.run(tiny_context)
    record = next(r for r in group.records if r.key == "sdpa_math float32 seq=32")
    assert record.status == "ok"
    assert record.flops == 4 * 2 * 32 * 32 * 8 / 2


def test_llc_size_from_a_sysfs_tree(tmp_path):
    for index, (level, kind, size) in enumerate([(1, "Data", "32K"), (1, "Instruction", "32K"),
                                                 (2, "Unified", "1024K"), (3, "Unified", "32768K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    assert cpu_llc_from_sysfs(tmp_path) == 32 * 2**20
    assert cpu_llc_from_sysfs(tmp_path / "missing") is None
    assert parse_size("2 MiB") == 2 * 2**20 and parse_size("bogus") is None


def test_sizes_are_skipped_with_a_reason_when_too_slow_or_too_big():
    rates = RateTracker()
    assert rates.estimate_s("float32", 1e9) is None  # nothing measured yet: measure it
    rates.note("float32", flops=1e9, seconds=0.01)  # 100 GFLOP/s
    assert rates.estimate_s("float32", 8e9) == 0.08
    assert too_slow_reason(0.08, 0.3) is None
    assert "exceeds" in too_slow_reason(rates.estimate_s("float32", 1e11), 0.3)
    assert too_big_reason(2**30, None) is None and too_big_reason(2**20, 2**21) is None
    assert "MiB" in too_big_reason(2**22, 2**21)
