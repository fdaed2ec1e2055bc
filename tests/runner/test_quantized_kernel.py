"""Weight-only int8/int4 storage and bringup's host kernel for it: the stated conventions hold exactly, and the
kernel matches the module-level reference (dequantize, then F.linear in float32) for any row count."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bringup.runner.host import quantized as quantized_kernel
from bringup.runner.model.linear_kinds import INT4, INT4_DEQUANT, INT8, INT8_DEQUANT, apply, place, to_out_in
from bringup.runner.model.quantized_weights import (
    dequantize_int4,
    dequantize_int8,
    pack_int4,
    quantize_int4,
    quantize_int8,
)
from tests.runner.host_compiler import needs_compiler

DEQUANTIZE = {INT8: dequantize_int8, INT4: dequantize_int4}


def test_int8_is_symmetric_per_output_channel_rounded_to_nearest():
    w = torch.tensor([[1.0, -0.5, 0.25, 0.0], [0.0, 0.0, 0.0, 0.0], [-3.0, 1.0, 2.0, 0.9]])
    stored = quantize_int8(w)
    assert stored.dtype == torch.uint8 and stored.shape == (3, 4 + 4)
    codes = stored[:, :4].contiguous().view(torch.int8)
    assert codes[0].tolist() == [127, -64, 32, 0]  # -63.5 and 31.75 round to nearest (-64 is even)
    assert codes[1].tolist() == [0, 0, 0, 0]  # an all-zero row has scale 0, not NaN
    assert codes[2].tolist() == [-127, 42, 85, 38]
    assert torch.allclose(dequantize_int8(stored)[2], torch.tensor([-3.0, 42 * 3 / 127, 85 * 3 / 127, 38 * 3 / 127]))
    assert torch.equal(dequantize_int8(stored)[1], torch.zeros(4))


def test_int4_is_d_times_q_plus_min_per_group_of_32():
    gen = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (3, 2, 32), generator=gen, dtype=torch.uint8)
    codes[..., 0], codes[..., 1] = 0, 15  # every group spans the full code range, so its d and m come back
    d, m = torch.rand(3, 2, generator=gen) + 0.1, torch.randn(3, 2, generator=gen)
    w = (codes.float() * d.unsqueeze(-1) + m.unsqueeze(-1)).reshape(3, 64)
    stored = quantize_int4(w)
    assert stored.shape == (3, 2 * 24)
    assert torch.allclose(dequantize_int4(stored), w, atol=1e-6)
    # GGUF Q4_0 (w = d*(q-8), d float16) is the same layout with m = -8d, exactly: d*q and -8d and their sum fit
    # float32's mantissa; codes j and j+16 share byte j (low nibble, high nibble), as in GGUF
    d = d.half().float()
    q4_0 = pack_int4(d, -8 * d, codes)
    assert torch.equal(dequantize_int4(q4_0), ((codes.float() - 8) * d.unsqueeze(-1)).reshape(3, 64))
    assert q4_0[0, 8].item() == codes[0, 0, 0].item() | (codes[0, 0, 16].item() << 4)


def test_int4_refuses_rows_that_are_not_whole_groups():
    with pytest.raises(ValueError, match="48 input features are not a multiple of the int4 group of 32"):
        quantize_int4(torch.ones(4, 48))


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 9, 16, 17, 40])  # 4-row passes, remainders, and past KERNEL_ROWS
def test_the_kernel_matches_dequantize_then_f_linear(scheme, rows):
    gen = torch.Generator().manual_seed(rows)
    w, bias = torch.randn(37, 96, generator=gen), torch.randn(37, generator=gen)  # 37: a partial chunk of rows
    stored = place(w, scheme)
    x = torch.randn(rows, 192, generator=gen)[:, ::2]  # strided rows
    want = F.linear(x, DEQUANTIZE[scheme](stored), bias)
    got = apply(x, stored, bias, scheme)
    assert got.dtype == torch.float32 and got.shape == (rows, 37)
    assert (got - want).abs().max().item() <= 1e-4 * want.abs().max().item()
    assert torch.equal(apply(x, stored, bias, INT8_DEQUANT if scheme == INT8 else INT4_DEQUANT), want)
    assert torch.equal(to_out_in(stored, scheme), DEQUANTIZE[scheme](stored))


@needs_compiler
def test_bfloat16_activations_are_widened_and_the_result_rounded_once():
    gen = torch.Generator().manual_seed(1)
    w, x = torch.randn(16, 64, generator=gen), torch.randn(2, 64, generator=gen).bfloat16()
    stored = place(w, INT8)
    got = apply(x, stored, None, INT8)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, F.linear(x.float(), dequantize_int8(stored)).bfloat16())


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4])
def test_the_start_up_check_passes_on_a_sound_kernel(scheme):
    assert quantized_kernel.check(torch.device("cpu"), scheme) is None


def test_the_kernel_refuses_a_weight_of_another_width():
    stored = quantize_int8(torch.ones(8, 32))
    with pytest.raises(ValueError, match="x has 16 features per row but the quantized weight has k=32"):
        quantized_kernel.run(torch.ones(1, 16), stored, None, INT8)
