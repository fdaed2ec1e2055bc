"""Weight-only int8/int4 storage and bringup's host kernel for it: the stated conventions hold exactly, and the
kernel matches the module-level reference (dequantize, then F.linear in float32) for any row count."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bringup.runner.weights.formats.integer import (
    dequantize_int4,
    dequantize_int8,
    pack_int4,
    pack_int8,
    quantize_activations,
    quantize_int4,
    quantize_int8,
    reference_linear,
    unpack_int4,
    unpack_int8,
)
from bringup.runner.weights.kernels import quantized as quantized_kernel
from bringup.runner.weights.kinds import (
    DEQUANT_KINDS,
    INT4,
    INT4_G64,
    INT4_G128,
    INT8,
)
from bringup.runner.weights.registry import apply, place, to_out_in
from tests.runner.host_compiler import needs_compiler

DEQUANTIZE = quantized_kernel.DEQUANTIZE


def test_int8_is_symmetric_per_block_of_32_rounded_to_nearest():
    step = 2.0**-7  # max / 127 for the first block: a float16 value, so the codes below are the exact quotients
    block = torch.zeros(32)
    block[:4] = torch.tensor([127, -63.5, 31.75, 0.0]) * step
    w = torch.stack([torch.cat([block, 3 * block]), torch.zeros(64), torch.cat([torch.zeros(32), -block])])
    stored = quantize_int8(w)
    assert stored.dtype == torch.uint8 and stored.shape == (3, 64 + 2 * 2)  # codes and a float16 scale per block
    scales, codes = unpack_int8(stored)
    assert codes[0, :4].tolist() == [127, -64, 32, 0]  # -63.5 and 31.75 round to nearest (-64 is even)
    assert codes[0, 32:36].tolist() == [127, -64, 32, 0]  # the second block has its own scale (3 * step)
    assert codes[1].abs().sum().item() == 0 and codes[2, :32].abs().sum().item() == 0  # zero blocks: scale 0, no NaN
    assert scales[0].tolist() == [step, 3 * step]
    assert scales[1].tolist() == [0.0, 0.0]
    assert torch.equal(dequantize_int8(stored)[0, 32:34], torch.tensor([3 * 127 * step, -64 * 3 * step]))
    assert torch.equal(dequantize_int8(stored)[1], torch.zeros(64))


def test_int8_scales_round_up_to_float16_so_no_code_passes_127():
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(3)) * torch.logspace(-6, 3, 64)[:, None]
    scales, codes = unpack_int8(quantize_int8(w))
    exact = w.reshape(64, -1, 32).abs().amax(-1) / 127
    assert torch.equal(scales.half().float(), scales) and (scales >= exact).all()
    normal = exact >= 2.0**-14  # float16's normal range: one step is at most 2^-10 of the value
    assert (scales[normal] < exact[normal] * (1 + 2**-10)).all() and not normal.all()
    assert codes.abs().max().item() == 127  # the largest weight of some block still reaches the top code
    error = (dequantize_int8(quantize_int8(w)) - w).abs().reshape(64, -1, 32)
    assert (error <= scales.unsqueeze(-1) / 2).all()  # round to nearest, never clamped


def test_int8_refuses_what_float16_scales_cannot_hold():
    with pytest.raises(ValueError, match="float16"):
        quantize_int8(torch.full((1, 32), 1e7))  # 1e7 / 127 > 65504
    with pytest.raises(ValueError, match="not float16 values"):
        pack_int8(torch.full((1, 1), 1 / 3), torch.zeros(1, 32, dtype=torch.int8))


def test_activations_are_quantized_per_block_of_32_as_the_kernels_do():
    x = torch.zeros(1, 64)
    x[0, :3] = torch.tensor([2.0, -1.0, 0.5])
    x[0, 32] = float("nan")
    got = quantize_activations(x)
    assert got[0, :3].tolist() == pytest.approx([2.0, -64 * 2 / 127, 32 * 2 / 127])  # 63.5 -> 64, 31.75 -> 32
    assert torch.isnan(got[0, 32:]).all()  # a block holding NaN poisons every product it feeds


def test_int4_is_d_times_q_plus_min_per_group_of_32():
    gen = torch.Generator().manual_seed(0)
    codes = torch.randint(0, 16, (3, 2, 32), generator=gen, dtype=torch.uint8)
    codes[..., 0], codes[..., 1] = 0, 15  # every group spans the full code range, so its d and m come back
    d, m = torch.rand(3, 2, generator=gen) + 0.1, torch.randn(3, 2, generator=gen)
    w = (codes.float() * d.unsqueeze(-1) + m.unsqueeze(-1)).reshape(3, 64)
    d, m = d.half().float(), m.half().float()  # stored as float16: values that are float16 come back exactly
    w = (codes.float() * d.unsqueeze(-1) + m.unsqueeze(-1)).reshape(3, 64)
    stored = quantize_int4(w)
    assert stored.shape == (3, 2 * 20)  # float16 d and m, 16 bytes of nibbles per block
    assert torch.allclose(dequantize_int4(stored), w, atol=1e-6)
    # GGUF Q4_0 (w = d*(q-8), d float16) is the same layout with m = -8d, exactly: d*q and -8d and their sum fit
    # float32's mantissa
    q4_0 = pack_int4(d, -8 * d, codes)
    assert torch.equal(dequantize_int4(q4_0), ((codes.float() - 8) * d.unsqueeze(-1)).reshape(3, 64))
    assert torch.equal(unpack_int4(q4_0)[2], codes)


def test_the_tiles_interleave_16_rows_four_codes_at_a_time():
    """The bytes the kernel reads: per tile of 16 rows and block of 32 features, the rows' scales, then 64 bytes
    per 4 features (each row's 4 codes in turn); a last tile of fewer rows is laid out alike."""
    gen = torch.Generator().manual_seed(5)
    w = torch.randn(19, 64, generator=gen)
    stored = quantize_int8(w).reshape(-1)
    scales, codes = unpack_int8(quantize_int8(w))
    assert torch.equal(stored[:32].view(torch.float16).float(), scales[:16, 0])  # block 0 of tile 0: 16 scales
    group_1 = (stored[32 + 64: 32 + 128] ^ 128).view(torch.int8).reshape(16, 4)  # features 4..7, stored as q + 128
    assert torch.equal(group_1, codes[:16, 4:8])
    last = stored[16 * 68:].reshape(2, -1)[0]  # tile 1 (3 rows), block 0: 3 scales, then 12 bytes per group
    assert torch.equal(last[:6].view(torch.float16).float(), scales[16:, 0])
    assert torch.equal((last[6:18] ^ 128).view(torch.int8).reshape(3, 4), codes[16:, 0:4])
    nibbles = quantize_int4(w).reshape(-1)[64: 128].reshape(16, 4)  # tile 0, block 0, after 16 d and 16 m
    q = unpack_int4(quantize_int4(w))[2]
    assert torch.equal(nibbles, q[:16, 0, 0:4] | (q[:16, 0, 16:20] << 4))  # codes c and 16 + c share a byte


@pytest.mark.parametrize("quantize", [quantize_int8, quantize_int4])
def test_rows_that_are_not_whole_blocks_are_refused(quantize):
    with pytest.raises(ValueError, match="48 input features are not a multiple of the quantization block of 32"):
        quantize(torch.ones(4, 48))


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4, INT4_G64, INT4_G128])
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 9, 16, 17, 40])  # 4-row passes, remainders, and past PLAIN_C_ROWS
def test_the_kernel_matches_dequantize_then_f_linear(scheme, rows):
    gen = torch.Generator().manual_seed(rows)
    # 133 rows: 8 whole tiles (passes of STREAMS tiles on each of 2 threads) and a partial one; 256 inputs: whole
    # groups of every kind
    w, bias = torch.randn(133, 256, generator=gen), torch.randn(133, generator=gen)
    stored = place(w, scheme)
    x = torch.randn(rows, 512, generator=gen)[:, ::2]  # strided rows
    x[0, :32] = 0  # an all-zero block: scale 0
    want = reference_linear(x, DEQUANTIZE[scheme](stored), bias)
    got = apply(x, stored, bias, scheme)
    assert got.dtype == torch.float32 and got.shape == (rows, 133)
    assert (got - want).abs().max().item() <= 1e-4 * want.abs().max().item()
    assert torch.equal(apply(x, stored, bias, DEQUANT_KINDS[scheme]), want)
    assert torch.equal(to_out_in(stored, scheme), DEQUANTIZE[scheme](stored))


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4])
def test_each_block_is_an_exact_integer_dot_product(scheme):
    """Codes whose products sum to known integers, with power-of-two scales: the kernel's result is exact."""
    gen = torch.Generator().manual_seed(3)
    codes = torch.randint(-127, 128, (5, 64), generator=gen).float()
    w = codes / 64 if scheme == INT8 else (codes.clamp(0, 15) - 8) / 4
    w[:, 0], w[:, 32] = (127 / 64, 127 / 64) if scheme == INT8 else (-2.0, -2.0)  # pin each block's scale
    if scheme == INT4:
        w[:, 1], w[:, 33] = 7 / 4, 7 / 4
    x = torch.randint(-127, 128, (3, 64), generator=gen).float() / 8
    x[:, 0], x[:, 32] = 127 / 8, 127 / 8
    stored = place(w, scheme)
    exact = x.double() @ w.double().T
    assert torch.equal(apply(x, stored, None, scheme).double(), exact)


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4])
def test_a_nan_in_a_row_makes_that_rows_outputs_nan_only(scheme):
    stored = place(torch.randn(8, 64, generator=torch.Generator().manual_seed(4)), scheme)
    x = torch.ones(2, 64)
    x[1, 40] = float("nan")
    y = apply(x, stored, None, scheme)
    assert torch.isfinite(y[0]).all() and torch.isnan(y[1]).all()


@needs_compiler
def test_bfloat16_activations_are_widened_and_the_result_rounded_once():
    gen = torch.Generator().manual_seed(1)
    w, x = torch.randn(16, 64, generator=gen), torch.randn(2, 64, generator=gen).bfloat16()
    stored = place(w, INT8)
    got = apply(x, stored, None, INT8)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, F.linear(quantize_activations(x.float()), dequantize_int8(stored)).bfloat16())


@needs_compiler
@pytest.mark.parametrize("scheme", [INT8, INT4])
def test_the_start_up_check_passes_on_a_sound_kernel(scheme):
    assert quantized_kernel.check(torch.device("cpu"), scheme) is None


def test_the_kernel_refuses_a_weight_of_another_width():
    stored = quantize_int8(torch.ones(8, 32))
    with pytest.raises(ValueError, match="x has 16 features per row but the quantized weight has k=32"):
        quantized_kernel.run(torch.ones(1, 16), stored, None, INT8)


@needs_compiler
@pytest.mark.parametrize(("scheme", "group"), [(INT4, 32), (INT4_G64, 64), (INT4_G128, 128)])
@pytest.mark.parametrize("rows", [1, 3, 5])
def test_int4_groups_of_64_and_128_share_d_and_m_across_blocks(scheme, group, rows):
    gen = torch.Generator().manual_seed(group + rows)
    w, bias = torch.randn(37, 256, generator=gen), torch.randn(37, generator=gen)
    stored = place(w, scheme)
    assert stored.shape == (37, 256 // group * (4 + group // 2))  # float16 d and m per group, 16 bytes per 32
    d, m, codes = unpack_int4(stored, group)
    assert d.shape == m.shape == (37, 256 // group) and codes.shape == (37, 8, 32)
    values = codes.float().reshape(37, -1, group) * d.unsqueeze(-1) + m.unsqueeze(-1)
    assert torch.equal(to_out_in(stored, scheme), values.reshape(37, 256))
    assert (values.reshape(37, 256) - w).abs().max() <= d.max() / 2 + 1e-3  # round to nearest within each group
    x = torch.randn(rows, 256, generator=gen)
    want = reference_linear(x, to_out_in(stored, scheme), bias)
    got = apply(x, stored, bias, scheme)
    assert (got - want).abs().max().item() <= 1e-4 * want.abs().max().item()
