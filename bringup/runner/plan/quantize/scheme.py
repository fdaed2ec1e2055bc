"""The plan's `quantization` row: which quantization scheme the linear layers are served in, with its evidence.

`none` is today's path exactly. `int8` / `int4` as asked: bringup's host kernel where it builds and matches the
dequantize + F.linear reference on a check here, else that reference itself (a recorded fallback, WARNING).
`auto` considers a scheme only where its kernel checked out here; the engine then measures each on the served
model (auto_quantization/measure.py): decode steps faster than the unquantized path (under MARGIN of its time) and the
KL divergence of its next-token distributions from the unquantized model's, over a short text, at most
KLD_BUDGET; otherwise `none`, with the reason. An int8 / int4 scheme asked for a bfloat16 or float16 plan is served
with float32 activations where it can be, and every scheme served is timed against the unquantized plan once the plan
is confirmed (activations.py).

The token embedding and the norms stay in the plan dtype. The lm_head is quantized with the other linear layers:
it is the largest single weight of a small model (SmolLM2-135M: 28 M of 135 M parameters) and streaming it is a
large share of a decode step.

`fp8` (weight-only, float8_e4m3fn with a float32 scale per output channel) runs wherever the device stores float8
and casts to and from it exactly (checked by executing the casts, formats/fp8.py). It is applied as
dequantize + F.linear in float32, its module-level reference: torch's only FP8 matmul, `_scaled_mm`, takes float8
activations, so it computes another product (the row says by how much, measured on the device).
"""

from __future__ import annotations

import torch

from bringup.backends.host import is_host
from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.plan import Choice
from bringup.runner.weights.formats.fp8 import fp8_why_not, scaled_mm_why_not
from bringup.runner.weights.formats.integer import GROUP, INT4_GROUPS, group_why_not
from bringup.runner.weights.kernels import quantized as quantized_kernel
from bringup.runner.weights.kinds import DEQUANT_KINDS, FP8, INT4, INT4_KINDS, INT8

NONE, AUTO = "none", "auto"
SCHEMES = (INT8, *INT4_KINDS, FP8)
AUTO_SCHEMES = (INT8, INT4, FP8)  # what auto tries: int4's larger groups only when asked for
CHOICES = (NONE, *SCHEMES, AUTO)
DEQUANT = DEQUANT_KINDS  # the reference kind each scheme falls back to
QUANTIZED_AT_LOAD = "quantized at load (round to nearest)"  # the weights' origin, unless a file's (held_blocks.py)
KLD_BUDGET = 0.05  # nats per token, mean over the check text: llama.cpp's Q4_0 on 1B-class models is about this
DESCRIPTION = {INT8: f"int8 weights with a scale per block of {GROUP} (Q8_0's values and float16 scale), activations "
                     "int8 per block",
               **{kind: f"int4 weights with a scale and a minimum per group of {group} ("
                        + ("Q4_1's values, " if group == GROUP else "") + "float16 d and m), activations int8 per "
                        f"block of {GROUP}" for kind, group in INT4_GROUPS.items()},
               FP8: "float8_e4m3fn weights with a float32 scale per output channel (max / 448), weight-only: the "
                    "activations stay in the plan dtype"}


def check_requested(quantization: str | None) -> str:
    value = (quantization or NONE).lower()
    if value not in CHOICES:
        raise BringupError(f"--quantization {quantization!r} is not one of {', '.join(CHOICES)}; pick one (none "
                           "serves the plan dtype's weights)")
    return value


def scheme_why_not(scheme: str, device: torch.device, config: ModelConfig) -> str | None:
    """Why the linear layers of `config` cannot be stored in `scheme` on `device`, or None."""
    if scheme == FP8:
        why = fp8_why_not(device)
        return None if why is None else f"fp8 needs float8 weights: {why}"
    if not is_host(device):
        return f"the {scheme} kernels are host-memory (CPU) kernels; the model runs on {device}"
    why = group_why_not_for(scheme, config)
    return f"a layer has {why}" if why else None


def group_why_not_for(scheme: str, config: ModelConfig) -> str | None:
    """Why a linear layer's inputs are not whole blocks of `scheme`'s group, or None."""
    c = config
    ins = {c.hidden_size, c.num_heads * c.head_dim, c.intermediate_size}  # experts are not quantized
    for size in sorted(ins):
        why = group_why_not(size, INT4_GROUPS.get(scheme, GROUP))
        if why:
            return why
    return None


def plain_choice() -> Choice:
    return Choice(NONE, "not requested (--quantization none): the plan dtype's weights")


def requested_scheme(scheme: str, device: torch.device, config: ModelConfig, recorder: FallbackRecorder,
                     origin: str = QUANTIZED_AT_LOAD) -> tuple[WeightLayout, Choice]:
    """The layout and row for an explicit --quantization int8|int4: the kernel, or its recorded fallback; `origin`
    says how the stored weights are made from the checkpoint's."""
    why = scheme_why_not(scheme, device, config)
    if why:
        raise BringupError(f"--quantization {scheme}: {why}; use --quantization none (or auto)")
    if scheme == FP8:
        return WeightLayout(FP8, FP8, 0), requested_fp8(device)
    kernel_why = quantized_kernel.check(device, scheme)
    if kernel_why is None:
        return WeightLayout(scheme, scheme, 0), Choice(scheme, f"requested; {DESCRIPTION[scheme]}, {origin}; bringup's "
                                                              "host kernel matched dequantize + F.linear on a check "
                                                              "here")
    recorder.record("op", f"{scheme} linear", wanted=f"bringup's {scheme} host kernel",
                    instead="dequantize + F.linear (float32)", why=kernel_why)
    return WeightLayout(DEQUANT[scheme], DEQUANT[scheme], 0), Choice(
        scheme, f"requested; {DESCRIPTION[scheme]}, {origin}; applied as dequantize + F.linear: the kernel "
                f"{kernel_why}")


def requested_fp8(device: torch.device) -> Choice:
    """The row for --quantization fp8: how the weights are quantized and applied, and why not by `_scaled_mm`."""
    return Choice(FP8, f"requested; {DESCRIPTION[FP8]}, quantized at load (round to nearest even), applied as "
                       f"dequantize + F.linear in float32: {scaled_mm_why_not(device)}")


def checked_note(scheme: str) -> str:
    """What checked out here for `scheme` before auto measured it."""
    return "its float8 casts checked out here" if scheme == FP8 else "the kernel checked out here"


def kernel_why_not(device: torch.device, scheme: str) -> str | None:
    """Why `scheme`'s product cannot be computed as checked here, or None (fp8's is its reference itself)."""
    return None if scheme == FP8 else quantized_kernel.check(device, scheme)


def auto_candidates(device: torch.device, config: ModelConfig) -> tuple[list[str], list[str]]:
    """(schemes --quantization auto may time on the model, why each other one is not a candidate)."""
    candidates, notes = [], []
    for scheme in AUTO_SCHEMES:
        why = scheme_why_not(scheme, device, config) or kernel_why_not(device, scheme)
        if why:
            notes.append(f"{scheme} not tried: {why}")
        else:
            candidates.append(scheme)
    return candidates, notes


def is_quantized(choice: Choice) -> bool:
    return choice.value in SCHEMES
