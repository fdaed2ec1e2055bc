"""The plan's `quantization` and `weight_layout` rows for a pre-quantized checkpoint (compressed-tensors): it is
served in its own scheme, never quantized again.

FP8 weights go into the fp8 kind as stored (its codes and scales), applied as quantize/scheme.py's fp8 is, on a
device whose float8 casts check out. int8 weights (a scale per output channel) and int4 weights (W4A16: a scale per
group) are dequantized at load and served as float weights in the plan dtype, in the measured layout: bringup's
int8 kind keeps a scale per block of 32, so re-quantizing int8 would round it a second time, and its int4 kernels
quantize the activations to int8 per block, which a W4A16 checkpoint's math does not.
"""

from __future__ import annotations

import torch

from bringup.errors import BringupError
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.plan import Choice
from bringup.runner.plan.quantize.scheme import NONE
from bringup.runner.weights.formats.compressed_tensors.scheme import StoredQuantization
from bringup.runner.weights.formats.fp8 import fp8_why_not, scaled_mm_why_not
from bringup.runner.weights.kinds import FP8


def checkpoint_scheme(stored: StoredQuantization, requested: str, device: torch.device, layout: WeightLayout,
                      layout_choice: Choice) -> tuple[WeightLayout, Choice, Choice]:
    """(layout, its row, the quantization row) for a checkpoint quantized as `stored`; BringupError for a
    --quantization other than none (or the checkpoint's own scheme) and for FP8 on a device without float8."""
    if requested not in (NONE, stored.scheme):
        raise BringupError(f"--quantization {requested}: {stored.source} is already quantized ({stored.describe()}) "
                           "and is served as stored; drop --quantization, or use the unquantized model to quantize "
                           "it another way")
    origin = f"from the checkpoint's {stored.describe()}"
    if stored.scheme != FP8:
        why = ("bringup's int8 kind keeps a scale per block of 32, not this per-channel math" if stored.bits == 8 else
               "bringup's int4 kernels quantize the activations to int8, which this checkpoint's W4A16 math does not")
        return layout, layout_choice, Choice(NONE, f"{origin}, dequantized at load to float32 (w = scale * q) and "
                                                   f"served in the plan dtype: {why}")
    why = fp8_why_not(device)
    if why:
        raise BringupError(f"{stored.source}: its {stored.describe()} need float8 on the device: {why}; run it on a "
                           "device with float8 (--device cpu), or use the unquantized model")
    activations = ("its dynamic per-token activation quantization is not applied: served weight-only"
                   if stored.dynamic_activations else "weight-only, as the checkpoint asks")
    quantization = Choice(FP8, f"{origin}, loaded as stored ({activations}); applied as dequantize + F.linear in "
                               f"float32: {scaled_mm_why_not(device)}")
    return WeightLayout(FP8, FP8, 0), Choice(FP8, "the checkpoint's fp8 storage (see quantization)"), quantization
