"""The quantized kernels in verify-ops: the real run on this CPU, a corrupted kernel, a kernel torch lacks, and the
quantization conventions against torch's own quantizers."""

import json

import pytest
import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog import load_catalog, select_cases, with_model_cases
from bringup.probes.ops.catalog.quantized import (
    dequantize_int4,
    dequantize_int8,
    nibbles_in_bytes,
    quantize_int4_groups,
    quantize_int8_per_channel,
)
from bringup.probes.ops.model_shapes import read_model_shapes
from tests.cli.run_cli import run_cli
from tests.probes.ops.missing_kernel import MISSING
from tests.real_model import smollm2_hf_dir

CPU_KERNELS = {"_weight_int8pack_mm": "float32", "_weight_int4pack_mm_for_cpu": "float32", "_int_mm": "int8",
               "_scaled_mm": "float8_e4m3fn"}


def _verify(tmp_path, *args):
    result = run_cli(["verify-ops", "--no-isolate", "--json", "--profile", str(tmp_path / "p.yaml"), *args])
    return result, json.loads(result.stdout)


def _ops_args(names):
    return [arg for name in names for arg in ("--op", name)]


@pytest.mark.parametrize("name", sorted(CPU_KERNELS))
def test_each_cpu_kernel_passes_its_decode_and_prefill_cases(tmp_path, name):
    if not hasattr(torch.ops.aten, name):
        pytest.skip(f"this torch ({torch.__version__}) has no aten.{name}")
    result, doc = _verify(tmp_path, "--op", name, "--dtype", CPU_KERNELS[name], "-k", "decode|prefill")
    assert result.code == 0, result.stderr
    cases = doc["cases"]
    roles = {c["case"].split(" ")[0] for c in cases}
    assert roles == {"decode", "prefill"}
    assert [(c["case"], c["status"], c["message"]) for c in cases if c["status"] != "pass"] == []
    assert all(c["max_abs"] is not None for c in cases)


def test_the_generic_int4_kernel_passes_or_says_why_not(tmp_path):
    result, doc = _verify(tmp_path, "--op", "_weight_int4pack_mm", "--dtype", "bfloat16", "-k", "decode")
    assert result.code == (0 if any(c["status"] == "pass" for c in doc["cases"]) else 1)  # 1: nothing verified
    for case in doc["cases"]:  # CPU builds have only the _for_cpu pair; CUDA/MPS/XPU builds have this one
        assert case["status"] == "pass" or (case["status"] == "unsupported" and "_convert_weight_to_int4pack"
                                            in case["message"]), case


def test_int8_weight_only_kernel_that_is_one_percent_off_fails_with_the_mismatch(tmp_path, override_cpu_kernel):
    def one_percent_high(x, weight, scales):
        return F.linear(x, weight.to(x.dtype) * scales[:, None].to(x.dtype)) * 1.01

    override_cpu_kernel("_weight_int8pack_mm", one_percent_high)
    names = ["_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu"]
    result, doc = _verify(tmp_path, *_ops_args(names), "--dtype", "float32", "-k", "decode")
    assert result.code == 1
    by_op = {name: [c for c in doc["cases"] if c["op"] == name] for name in names}
    assert by_op["_weight_int8pack_mm"] and all(c["status"] == "fail" for c in by_op["_weight_int8pack_mm"])
    for case in by_op["_weight_int8pack_mm"]:
        assert "outside rtol" in case["message"] and case["max_rel"] > 1e-3
    assert {c["status"] for c in by_op["_weight_int4pack_mm_for_cpu"]} == {"pass"}  # only the corrupted one fails


def test_a_kernel_this_torch_lacks_is_unsupported_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("BRINGUP_OPS_PLUGINS", "tests.probes.ops.missing_kernel")
    result, doc = _verify(tmp_path, "--op", MISSING)
    assert result.code == 1 and not doc["verified"]  # nothing verified
    [case] = doc["cases"]
    assert case["status"] == "unsupported"
    assert f"has no aten.{MISSING}" in case["message"] and torch.__version__ in case["message"]


def test_int4_convention_is_torchs_own_quantizer_and_kernel():
    common = pytest.importorskip("torch.testing._internal.common_quantization")
    weights = torch.randn(96, 256, generator=torch.Generator().manual_seed(0))  # [N, K]
    q, scales_and_zeros = quantize_int4_groups(weights, 64)
    torch_q, torch_scales_and_zeros = common._group_quantize_tensor(weights.T.contiguous(), 4, 64)  # takes [K, N]
    assert torch.equal(q, torch_q) and torch.allclose(scales_and_zeros, torch_scales_and_zeros)
    error = (dequantize_int4(q, scales_and_zeros, 64) - weights.double()).abs()
    assert error.max() <= scales_and_zeros[..., 0].max() / 2 + 1e-6  # round to nearest: half a step at most
    assert nibbles_in_bytes(torch.tensor([[1, 2, 15, 0]])).tolist() == [[0x12, 0xF0]]


def test_int4_groups_span_their_range_exactly():
    weights = torch.randn(32, 128, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    q, scales_and_zeros = quantize_int4_groups(weights, 32)
    groups = weights.reshape(32, 4, 32)
    back = dequantize_int4(q, scales_and_zeros, 32).reshape(32, 4, 32)
    # q = 0 holds each group's minimum and q = 15 its maximum, exactly: zero = min + 8 * scale, scale = range / 15
    assert torch.allclose(back.amin(dim=-1), groups.amin(dim=-1), rtol=0, atol=1e-12)
    assert torch.allclose(back.amax(dim=-1), groups.amax(dim=-1), rtol=0, atol=1e-12)
    assert q.min() == 0 and q.max() == 15


def test_int8_convention_is_torchs_own_per_channel_quantizer():
    common = pytest.importorskip("torch.testing._internal.common_quantization")
    weights = torch.randn(64, 128, generator=torch.Generator().manual_seed(1))
    q, scales = quantize_int8_per_channel(weights)
    torch_q, torch_scales, _zeros = common._dynamically_quantize_per_channel(weights, -128, 127, torch.int8)
    assert torch.equal(q, torch_q) and torch.equal(scales, torch_scales)
    assert (dequantize_int8(q, scales) - weights.double()).abs().max() <= scales.max() / 2 + 1e-6


def test_the_models_projections_and_lm_head_get_quantized_cases():
    shapes = read_model_shapes(smollm2_hf_dir())
    catalog = with_model_cases(list(load_catalog().ops.values()), shapes)
    by_op = {spec.name: [c.label for c in spec.cases if c.label.startswith("model: ")] for spec in catalog}
    int8 = " | ".join(by_op["_weight_int8pack_mm"])
    for layer in ("q_proj [1,576] [576,576]", "down_proj [128,1536] [576,1536]", "lm_head [1,576] [49152,576]"):
        assert layer in int8, layer
    int4 = by_op["_weight_int4pack_mm_for_cpu"]
    assert "model: gate_up_proj [1,576] [1536,576] group=64" in int4  # 576 = 4.5 x 128: the largest group is 64
    assert "model: down_proj [1,1536] [576,1536] group=128" in int4
    assert len(by_op["_int_mm"]) == len(by_op["_scaled_mm"]) == len(by_op["_weight_int8pack_mm"]) == 12


def test_model_cases_run_at_the_models_width(tmp_path):
    catalog_keys = select_cases(load_catalog(), ["_weight_int8pack_mm"], ["float32"], "decode")
    assert len(catalog_keys) == 2  # M=1 and M=4, without --model no model cases
    result, doc = _verify(tmp_path, "--model", str(smollm2_hf_dir()), "--op", "_weight_int8pack_mm",
                          "--op", "_weight_int4pack_mm_for_cpu", "-k", "down_proj \\[1,")
    assert result.code == 0, result.stderr
    assert {(c["op"], c["status"]) for c in doc["cases"]} == {("_weight_int8pack_mm", "pass"),
                                                                ("_weight_int4pack_mm_for_cpu", "pass")}


def _scaled_product(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    return (a.to(torch.float64) * scale_a.double()) @ (b.to(torch.float64) * scale_b.double())


@pytest.mark.parametrize("error, status", [(2**-11, "pass"), (1e-2, "fail")])
def test_float8_products_are_judged_at_a_float16_accumulator(tmp_path, override_cpu_kernel, error, status):
    """A float32 result off by float16's rounding (as Hopper's float8 tensor cores give) passes; 1 % does not."""
    def coarse(*args, **kwargs):
        exact = _scaled_product(*args, **kwargs)
        signs = torch.where(torch.arange(exact.numel()).reshape(exact.shape) % 2 == 0, 1.0, -1.0)
        return (exact * (1 + error * signs)).to(torch.float32)

    override_cpu_kernel("_scaled_mm", coarse)
    result, doc = _verify(tmp_path, "--op", "_scaled_mm", "--dtype", "float8_e4m3fn", "-k", r"^_scaled_mm\[\w+\] \[")
    cases = doc["cases"]
    assert cases and {c["status"] for c in cases} == {status}, [(c["case"], c["message"]) for c in cases]
    for case in cases:  # float16's row (1e-3) scaled by the accumulation, not float32's 1.3e-6
        assert 1e-3 <= case["rtol"] < 2e-3
    assert result.code == (0 if status == "pass" else 1)


@pytest.mark.parametrize("message, status", [
    ("self.size(0) needs to be greater than 16, but got 1", "unsupported"),  # CUDA's _int_mm at decode shapes
    ("Expected A.dtype() == at::kBFloat16 to be true, but got false.", "unsupported"),  # CUDA's int4 kernel
    ("the kernel computed garbage", "error"),
])
def test_a_kernel_refusing_a_shape_or_dtype_is_unsupported_and_other_errors_are_not(tmp_path, override_cpu_kernel,
                                                                                    message, status):
    def refuses(a, b):
        raise RuntimeError(message)

    override_cpu_kernel("_int_mm", refuses)
    result, doc = _verify(tmp_path, "--op", "_int_mm", "--dtype", "int8", "-k", "decode")
    cases = doc["cases"]
    assert cases and {c["status"] for c in cases} == {status}
    assert all(message in c["message"] for c in cases)
    assert result.code == 1
