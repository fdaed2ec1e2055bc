"""The device kinds' storage (formats/device_int8.py, device_fp8.py): their bytes hold what the kernels read as views,
the shapes come back from the stored tensor alone, and a kernel that computes wrong numbers is told from a sound one
by the start-up check (weights/kernels/device_check.py) on the CPU, where torch has both kernels too."""

from __future__ import annotations

import pytest
import torch

from bringup.runner.weights.formats import device_fp8, device_int8


@pytest.mark.parametrize("out, k", [(1, 4), (3, 4), (48, 64), (33, 96), (7, 576), (576, 576), (49152, 576)])
def test_int8_pack_gives_back_its_output_channels_codes_and_scales(out, k):
    codes = torch.randint(-127, 128, (out, k), dtype=torch.int8)
    scale = torch.rand(out) + 0.5
    stored = device_int8.pack(codes, scale)
    assert stored.dtype == torch.uint8 and stored.shape == (out + device_int8.scale_rows(out, k), k)
    got_codes, got_scale = device_int8.unpack(stored)
    assert got_codes.is_contiguous() and torch.equal(got_codes, codes) and torch.equal(got_scale, scale)


def test_int8_pack_quantizes_per_row_symmetric_within_half_a_step():
    w = torch.randn(40, 64, generator=torch.Generator().manual_seed(3))
    w[5] = 0.0  # a zero row: scale 0, codes 0
    back = device_int8.dequantize(device_int8.quantize(w))
    step = w.abs().amax(dim=1, keepdim=True) / 127
    assert torch.all((back - w).abs() <= step / 2 + 1e-7) and torch.equal(back[5], torch.zeros(64))


def test_fp8_scaled_mm_storage_keeps_one_scale_and_rounds_to_e4m3():
    w = torch.randn(24, 32, generator=torch.Generator().manual_seed(4))
    stored = device_fp8.quantize(w)
    codes, scale = device_fp8.unpack(stored)
    assert stored.shape == (25, 32) and codes.dtype == torch.float8_e4m3fn and scale.item() == w.abs().max() / 448
    assert torch.equal(device_fp8.dequantize(stored), codes.float() * scale)
    assert ((device_fp8.dequantize(stored) - w).abs() / w.abs().max()).max() < 2 ** -4
