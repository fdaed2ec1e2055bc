"""The device kinds' storage (formats/device_int8.py, device_fp8.py): their bytes hold what the kernels read as views,
and the shapes come back from the stored tensor alone; and the plan's reading of the probe's records
(plan/quantize/device_kernels.py), given as data: a supported record plus a passing check serves the kind, anything
less is refused quoting the record. (The kernels on the emulated device: tests/emulator/test_device_quantization.py.)"""

from __future__ import annotations

import pytest
import torch

from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.runner.plan.quantize.device_kernels import device_kernel
from bringup.runner.weights.formats import device_fp8, device_fp8_rowwise, device_int4, device_int8
from bringup.runner.weights.formats.integer import quantize_int4, unpack_int4
from bringup.runner.weights.kinds import FP8, INT4, INT4_G64, INT8


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


CPU_INT4 = "_weight_int4pack_mm_for_cpu"


def test_int4_pack_holds_the_host_int4_codes_as_they_are_and_rounds_only_scale_and_zero():
    """Q4_1's w = q d + m as the op's (q - 8) scale + zero: the codes read back through the kernel equal the host's,
    scale = d and zero = m + 8d each rounded once to bfloat16."""
    host = quantize_int4(torch.randn(48, 128, generator=torch.Generator().manual_seed(5)))
    d, m, codes = unpack_int4(host)
    stored = device_int4.from_int4(CPU_INT4, host)
    assert stored.dtype == torch.uint8 and stored.shape == (48, 128 * 5 // 8)
    assert torch.equal(device_int4.codes(CPU_INT4, stored), codes.reshape(48, 128).float())
    scale = d.to(torch.bfloat16).float().repeat_interleave(32, dim=1)
    zero = (m + 8 * d).to(torch.bfloat16).float().repeat_interleave(32, dim=1)
    assert torch.equal(device_int4.dequantize(CPU_INT4, stored), (codes.reshape(48, 128).float() - 8) * scale + zero)


def test_int4_pack_names_the_layer_sizes_its_packing_kernels_cannot_take():
    assert device_int4.shapes_why_not([576, 192, 49152], [576, 1536]) is None
    why = device_int4.shapes_why_not([40, 64], [64, 96])
    assert why == ("the int4 packing kernels take output sizes in multiples of 16 and input sizes in multiples of 64; "
                   "this model's linear layers have 40 outputs, 96 inputs")


def test_fp8_rowwise_storage_keeps_a_scale_per_output_channel():
    w = torch.randn(24, 32, generator=torch.Generator().manual_seed(6))
    codes, scales = device_fp8_rowwise.unpack(device_fp8_rowwise.quantize(w))
    assert codes.dtype == torch.float8_e4m3fn and torch.equal(scales, w.abs().amax(dim=1) / 448)
    assert ((codes.float() * scales[:, None] - w).abs() / w.abs().amax(dim=1, keepdim=True)).max() < 2 ** -4


def _profile(**features) -> Profile:
    records = {name: Capability(**record) for name, record in features.items()}
    return Profile(capabilities=Capabilities(features=records))


SUPPORTED_INT4 = dict(status="supported", evidence="_weight_int4pack_mm_for_cpu[float32] vs float64: max_abs 5e-06",
                      details={"kernel": "_weight_int4pack_mm_for_cpu", "activations": "float32"})
SUPPORTED_INT8 = dict(status="supported", evidence="_weight_int8pack_mm[float32] vs float64: max_abs 3e-06",
                      details={"kernel": "_weight_int8pack_mm", "activations": "float32"})


def test_a_supported_record_and_a_passing_check_serve_the_device_kind_naming_both():
    found, why = device_kernel(INT8, torch.device("cpu"), _profile(int8_weight_only_matmul=SUPPORTED_INT8),
                               torch.bfloat16)
    assert why == "" and found is not None and found.kind == "int8_pack" and found.kernel == "_weight_int8pack_mm"
    assert "capabilities.features.int8_weight_only_matmul is supported (_weight_int8pack_mm[float32]" in found.note
    assert found.note.endswith("at float32 and bfloat16")
    found, why = device_kernel(INT4, torch.device("cpu"), _profile(int4_weight_only_matmul=SUPPORTED_INT4),
                               torch.float32)
    assert why == "" and found is not None and found.kind == "int4_pack_cpu" and found.kernel == CPU_INT4


@pytest.mark.parametrize("features, scheme, said", [
    ({}, INT8, "capabilities.features.int8_weight_only_matmul is unknown (not in the profile: run bringup probe"),
    ({"fp8_scaled_mm": dict(status="unsupported", reason="_scaled_mm[float8_e4m3fn]: unsupported (no kernel)")}, FP8,
     "capabilities.features.fp8_scaled_mm is unsupported (_scaled_mm[float8_e4m3fn]: unsupported (no kernel))"),
    ({"int4_weight_only_matmul": dict(status="supported", evidence="ok", details={"kernel": "_weight_int4pack_mm"})},
     INT4, "is supported (_weight_int4pack_mm), but the int4_pack weights' check on cpu failed: it does not run at "
           "float32: NotImplementedError: Could not run 'aten::_convert_weight_to_int4pack'"),
    ({"int4_weight_only_matmul": dict(status="supported", evidence="ok", details={"kernel": "_int_mm"})}, INT4,
     "is supported by _int_mm, not by _weight_int4pack_mm or _weight_int4pack_mm_for_cpu, the kernels the int4 "
     "device kinds call"),
    ({"int4_weight_only_matmul": SUPPORTED_INT4}, INT4_G64, "but the runner has no int4_g64 weight kind off the host"),
    ({"int8_weight_only_matmul": {**SUPPORTED_INT8, "details": {"kernel": "_int_mm"}}}, INT8,
     "is supported by _int_mm, not by _weight_int8pack_mm, the kernel the int8 device kind calls"),
])
def test_anything_less_is_refused_quoting_the_record(features, scheme, said):
    found, why = device_kernel(scheme, torch.device("cpu"), _profile(**features), torch.float32)
    assert found is None and said in why, why


SUPPORTED_FP8 = dict(status="supported", evidence="_scaled_mm[float8_e4m3fn] vs float64: max_abs 1e-06",
                     details={"kernel": "_scaled_mm", "activations": "float8_e4m3fn"})


def test_fp8_takes_per_row_scales_only_where_their_record_is_supported_and_says_which():
    rowwise_off = dict(status="unsupported", reason="_scaled_mm[float8_e4m3fn] decode [1,1024] scales=per row/column: "
                                                    "unsupported (rowwise scales need an sm90 kernel)")
    found, _ = device_kernel(FP8, torch.device("cpu"), _profile(fp8_scaled_mm=SUPPORTED_FP8,
                                                                fp8_scaled_mm_rowwise=rowwise_off), torch.float32)
    assert found is not None and found.kind == "fp8_scaled_mm"
    assert found.note.startswith("per-tensor scales: torch's _scaled_mm (fp8_scaled_mm weights)")
    assert found.note.endswith("not per-row scales, as capabilities.features.fp8_scaled_mm_rowwise is unsupported "
                               "(_scaled_mm[float8_e4m3fn] decode [1,1024] scales=per row/column: unsupported "
                               "(rowwise scales need an sm90 kernel)), so no fp8 kernel is verified on cpu")
    found, _ = device_kernel(FP8, torch.device("cpu"), _profile(fp8_scaled_mm=SUPPORTED_FP8,
                                                                fp8_scaled_mm_rowwise=SUPPORTED_FP8), torch.float32)
    assert found is not None and found.kind == "fp8_scaled_mm_rowwise" and found.note.startswith("per-row scales: ")
