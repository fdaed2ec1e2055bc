"""oneDNN's pre-packed weights in bfloat16 (weights/registry.packed_check): checked against float64 like F.linear."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from bringup.runner.weights import layouts, registry
from bringup.runner.weights.kinds import PACKED

CPU = torch.device("cpu")


@pytest.fixture
def packed_runs() -> None:
    why = registry.packed_check(CPU, torch.float32)
    if why is not None:
        pytest.skip(f"pre-packed weights do not run in this torch build: {why}")


def bfloat16_packing_refused() -> str | None:
    """oneDNN's own refusal to pack a bfloat16 weight on this CPU (it needs AVX-512 or AVX-NE-CONVERT), asked of
    torch directly, not of the check under test; None where it packs."""
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.ones(16, 16, dtype=torch.bfloat16), None)
    except RuntimeError as error:
        return str(error)
    return None


def test_a_cpu_that_cannot_pack_bfloat16_gets_the_reason_not_packed_weights(packed_runs):
    refused = bfloat16_packing_refused()
    why = registry.packed_check(CPU, torch.bfloat16)
    if refused is None:
        assert why is None
    else:  # e.g. an AVX2-only CPU: "bf16 path needs the cpu support avx_ne_convert or avx512bw, ..."
        assert why is not None and refused.splitlines()[0] in why, why


def test_bfloat16_packed_weights_pass_where_float32_do_and_give_f_linear_within_a_rounding(packed_runs):
    if bfloat16_packing_refused() is not None:
        pytest.skip(f"oneDNN packs no bfloat16 weight on this CPU: {bfloat16_packing_refused()}")
    assert registry.packed_check(CPU, torch.bfloat16) is None
    assert registry.packed_check(CPU, torch.float16) == "packed weights are tried for float32 and bfloat16, not " \
                                                        "torch.float16"
    gen = torch.Generator().manual_seed(1)
    w, x = torch.randn(3072, 576, generator=gen).bfloat16(), torch.randn(300, 576, generator=gen).bfloat16()
    got = registry.apply(x, registry.place(w, PACKED), None, PACKED)
    want = torch.nn.functional.linear(x, w)
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    steps = (got.float() - want.float()).abs() / want.float().abs().clamp_min(2**-20)
    assert steps.max() <= 2**-7  # each sum in another order at most one bfloat16 step from F.linear's


def test_a_packed_product_half_a_percent_high_is_refused(packed_runs, monkeypatch):
    if bfloat16_packing_refused() is not None:
        pytest.skip(f"oneDNN packs no bfloat16 weight on this CPU: {bfloat16_packing_refused()}")
    real = layouts.packed_apply
    monkeypatch.setitem(registry.KINDS, PACKED, replace(registry.KINDS[PACKED],
                                                                 apply=lambda x, w, b: real(x, w, b) * 1.005))
    why = registry.packed_check(CPU, torch.bfloat16)
    assert why is not None and why.startswith("packed result"), why
