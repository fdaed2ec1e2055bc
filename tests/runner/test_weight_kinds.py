"""The kinds registry (weights/registry.py): every kind is listed there, needs no import side effect, and applies
its stored weight as its own float64 reference says, on the CPU."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from bringup.runner.weights.kinds import (
    ANY_DEVICE,
    CONVERTIBLE,
    DEVICE_KINDS,
    FP8,
    FP8_ROWWISE,
    HOST_MEMORY,
    INT4_PACK,
    INT4_PACK_CPU,
    INT4_PACK_KERNELS,
    INTEGER_KINDS,
    PANELS,
    SLICES,
)
from bringup.runner.weights.registry import KINDS, apply, kind, place, to_out_in
from tests.runner.host_compiler import needs_compiler

# float32 kinds differ from float64 by float32 rounding; the integer kinds' reference quantizes x as they do, so they
# differ by float32 sums; fp8 by the float8 product's own rounding of x (its reference does not round x)
# int4_pack_cpu and fp8_scaled_mm_rowwise by their bfloat16 results' rounding (their references round x as they do)
TOLERANCE = {FP8: 0.1, INT4_PACK_CPU: 2 ** -7, FP8_ROWWISE: 2 ** -7}
DEFAULT_TOLERANCE = 1e-4


def test_every_kind_named_in_kinds_py_is_in_the_registry_with_its_placement():
    assert set(INTEGER_KINDS) | {FP8, PANELS, SLICES, *CONVERTIBLE, *DEVICE_KINDS.values(), FP8_ROWWISE,
                                                                    *INT4_PACK_KERNELS} \
        == set(KINDS)
    assert {name for name, k in KINDS.items() if k.placement == HOST_MEMORY} == {PANELS, *INTEGER_KINDS}
    assert all(k.name == name and k.placement in (ANY_DEVICE, HOST_MEMORY) for name, k in KINDS.items())


@needs_compiler
@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_kind_applies_its_weight_as_its_float64_reference(name):
    if name == FP8 and not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("this torch has no float8_e4m3fn")
    if name == INT4_PACK:
        pytest.skip("_weight_int4pack_mm has kernels for CUDA, ROCm, MPS and XPU, not the CPU: the start-up check "
                    "proves it where it serves")
    gen = torch.Generator().manual_seed(1)
    w, b = torch.randn(48, 128, generator=gen), torch.randn(48, generator=gen)
    stored = place(w, name)
    for rows in (1, 5):
        x = torch.randn(rows, 128, generator=gen)
        got = apply(x, stored, b, name).double()
        want = kind(name).reference(x, stored, b)
        assert want.dtype == torch.float64 and got.shape == want.shape == (rows, 48)
        assert ((got - want).abs().max() / want.abs().max()).item() <= TOLERANCE.get(name, DEFAULT_TOLERANCE), name


@pytest.mark.parametrize("name", CONVERTIBLE)
def test_a_convertible_kind_turns_back_into_the_weight_it_stored(name):
    w = torch.randn(48, 40, generator=torch.Generator().manual_seed(2))
    assert torch.equal(to_out_in(place(w, name), name)[:48], w)


def test_slices_cannot_turn_back_and_an_unknown_kind_is_named():
    with pytest.raises(ValueError, match="'slices' cannot be converted back"):
        to_out_in(place(torch.ones(8, 4), SLICES), SLICES)
    with pytest.raises(ValueError, match="no linear-weight kind 'int3'; the kinds are in_out, out_in"):
        kind("int3")


@needs_compiler
def test_the_model_layer_applies_int8_without_the_plan_or_the_host_package_imported():
    script = ("import sys, torch\n"
              "from bringup.runner.weights.layout_linear import LayoutLinear\n"
              "layer = LayoutLinear(64, 32, bias=False)\n"
              "layer.load(torch.randn(32, 64), None, ['int8'])\n"
              "print(layer(torch.randn(2, 64), 'int8').shape)\n"
              "print(sorted(m for m in sys.modules if m.startswith(('bringup.runner.plan', 'bringup.runner.host'))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["torch.Size([2, 32])", "[]"]


def test_the_int4_kinds_follow_their_group_sizes_alone():
    """One tuple decides the int4 kinds: their names, their groups, their dequantizing fallbacks, the kernels' format
    codes and the list the kernels' dispatch is generated from."""
    from bringup.runner.weights.formats.integer import GROUP, INT4_GROUPS, KERNEL_FORMATS
    from bringup.runner.weights.kernels.layout_constants import INT4_FORMATS, WEIGHT_GROUPS
    from bringup.runner.weights.kinds import DEQUANT_KINDS, INT4_GROUP_SIZES, INT4_KINDS, int4_kind

    assert INT4_KINDS == ("int4", "int4_g64", "int4_g128") == tuple(map(int4_kind, INT4_GROUP_SIZES))
    assert all(size % GROUP == 0 for size in INT4_GROUP_SIZES)
    assert INT4_GROUPS == {"int4": 32, "int4_g64": 64, "int4_g128": 128}
    assert {kind: DEQUANT_KINDS[kind] for kind in INT4_KINDS} == {k: f"{k}_dequant" for k in INT4_KINDS}
    assert KERNEL_FORMATS == {"int8": 1, "int4": 2, "int4_g64": 3, "int4_g128": 4}
    assert INT4_FORMATS == "X(2,32) X(3,64) X(4,128)" and WEIGHT_GROUPS == {1: 32, 2: 32, 3: 64, 4: 128}
