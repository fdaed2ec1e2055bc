"""The kinds of linear-weight storage by name (plain data, no torch: registry.py builds the table of what each does).

`[in, out]` for `x @ W`, `[out, in]` for F.linear, pre-packed for the device's oneDNN inner product, as column slices
summed by `embedding_bag`, 16-column panels for bringup's own host kernel (layouts.py, kernels/panels.py); int8 /
int4 blocks of 32 applied by the host kernel or, their fallback, dequantized and applied by F.linear
(formats/integer.py, kernels/quantized.py); float8 with a scale per output channel (formats/fp8.py); and, for an
accelerator, torch's own `_weight_int8pack_mm`, `_weight_int4pack_mm` and `_scaled_mm` (formats/device_int8.py,
device_int4.py, device_fp8.py). The layout
chooser times them; the model uses the faster.
"""

from __future__ import annotations

IN_OUT, OUT_IN, PACKED, SLICES, PANELS = "in_out", "out_in", "packed", "slices", "panels"
PLAIN_KINDS = (IN_OUT, OUT_IN)
INT8, INT4 = "int8", "int4"
# the int4 kinds' input features per d and m, each a multiple of the activations' block of 32: the first is "int4"
# (GGUF's Q4_1), the others "int4_g<size>". Every int4 table, the kernels' formats and their dispatch follow this.
INT4_GROUP_SIZES = (32, 64, 128)


def int4_kind(group: int) -> str:
    return INT4 if group == INT4_GROUP_SIZES[0] else f"int4_g{group}"


INT4_KINDS = tuple(int4_kind(group) for group in INT4_GROUP_SIZES)
INT4_G64, INT4_G128 = int4_kind(64), int4_kind(128)
# each kernel kind's module-level reference: the same storage, dequantized and applied by F.linear
DEQUANT_KINDS = {kind: f"{kind}_dequant" for kind in (INT8, *INT4_KINDS)}
INT8_DEQUANT, INT4_DEQUANT = DEQUANT_KINDS[INT8], DEQUANT_KINDS[INT4]
INTEGER_KINDS = (*DEQUANT_KINDS, *DEQUANT_KINDS.values())
FP8 = "fp8"
# torch's device kernels the probe verifies (formats/device_int8.py, device_fp8.py): each scheme's kind off the host
INT8_PACK, FP8_SCALED_MM, FP8_ROWWISE = "int8_pack", "fp8_scaled_mm", "fp8_scaled_mm_rowwise"
# int4 through `_weight_int4pack_mm` or its CPU variant (formats/device_int4.py): one kind per kernel, the packed
# layout being each kernel's own
INT4_PACK, INT4_PACK_CPU = "int4_pack", "int4_pack_cpu"
INT4_PACK_KERNELS = {INT4_PACK: "_weight_int4pack_mm", INT4_PACK_CPU: "_weight_int4pack_mm_for_cpu"}
DEVICE_KINDS = {INT8: INT8_PACK, FP8: FP8_SCALED_MM}
QUANTIZED_KINDS = (*INTEGER_KINDS, FP8, *DEVICE_KINDS.values(), FP8_ROWWISE, *INT4_PACK_KERNELS)
CONVERTIBLE = (OUT_IN, IN_OUT, PANELS, PACKED)  # kinds whose storage turns back into [out, in] unchanged

ANY_DEVICE, HOST_MEMORY = "any device", "host memory"  # where a kind's storage can be applied
