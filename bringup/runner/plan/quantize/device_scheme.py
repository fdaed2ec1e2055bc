"""The quantization row off the host: `--quantization int8|int4|fp8` and auto's candidates on an accelerator, each
served by torch's kernel that the probe verified there (device_kernels.py), or refused quoting the record.

The host keeps bringup's own kernels (scheme.py); the start-up steps send a plan here when its device is not the
host, the same test the runner makes everywhere (backends/host.py), never a device's name.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.profiles.schema import Profile
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.plan import Choice
from bringup.runner.plan.quantize.device_kernels import device_kernel
from bringup.runner.plan.quantize.held_blocks import has_blocks, origin, requantized
from bringup.runner.plan.quantize.scheme import AUTO_SCHEMES, QUANTIZED_AT_LOAD, group_why_not_for
from bringup.runner.weights.formats import device_int4
from bringup.runner.weights.held import HELD_AS, MAPPED, LinearWeightTypes
from bringup.runner.weights.kinds import FP8_ROWWISE, FP8_SCALED_MM, INT4_PACK_KERNELS, INT8_PACK

INT4_DESCRIPTION = ("int4 codes per group of 32 as the host's int4 rounds them (float16 d and m), in the op's form "
                    "w = (q - 8) * scale + zero with scale = d and zero = m + 8d rounded to bfloat16, activations "
                    "bfloat16")
DESCRIPTION = {INT8_PACK: "int8 weights with a float32 scale per output channel (max / 127), activations in the plan "
                          "dtype",
               FP8_SCALED_MM: "float8_e4m3fn weights with one float32 scale per tensor (max / 448), activations "
                              "quantized to float8_e4m3fn per tensor at each product, a float32 result",
               FP8_ROWWISE: "float8_e4m3fn weights with a float32 scale per output channel (max / 448), activations "
                            "quantized to float8_e4m3fn per row (token) at each product, a bfloat16 result",
               **dict.fromkeys(INT4_PACK_KERNELS, INT4_DESCRIPTION)}  # by kind


def device_why_not(scheme: str, device: torch.device, config: ModelConfig, profile: Profile | None,
                   dtype: torch.dtype) -> tuple[str | None, str]:
    """(the kind serving `scheme` on `device`, the row's note) or (None, why not)."""
    why = group_why_not_for(scheme, config)
    if why:
        return None, f"a layer has {why}"
    found, why = device_kernel(scheme, device, profile, dtype)
    if found and found.kind in MAPPED:
        c = config
        why = device_int4.shapes_why_not([c.hidden_size, c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim,
                                          c.intermediate_size, c.vocab_size],
                                         [c.hidden_size, c.num_heads * c.head_dim, c.intermediate_size]) or ""
        return (None, f"{found.note}, but {why}") if why else (found.kind, found.note)
    return (found.kind, found.note) if found else (None, why)


def device_requested(scheme: str, device: torch.device, config: ModelConfig, profile: Profile | None,
                     dtype: torch.dtype, origin: Callable[[str], str] = lambda kind: QUANTIZED_AT_LOAD
                     ) -> tuple[WeightLayout, Choice]:
    """The layout and row for an explicit --quantization on `device` (`origin`: how the kind's weights are made from
    the checkpoint's); BringupError (one line) where the profile's record or the check says no."""
    kind, said = device_why_not(scheme, device, config, profile, dtype)
    if kind is None:
        raise BringupError(f"--quantization {scheme} on {device}: {said}; use --quantization none (or auto)")
    return WeightLayout(kind, kind, 0), Choice(scheme, f"requested; {DESCRIPTION[kind]}, {origin(kind)}; served by "
                                                       f"{said}")


def device_candidates(device: torch.device, config: ModelConfig, profile: Profile | None, dtype: torch.dtype
                      ) -> tuple[list[str], list[str], dict[str, str]]:
    """(the schemes auto may time on `device`, why each other one is not tried, the kind serving each candidate)."""
    candidates, notes, kinds = [], [], {}
    for scheme in AUTO_SCHEMES:
        kind, said = device_why_not(scheme, device, config, profile, dtype)
        if kind is None:
            notes.append(f"{scheme} not tried: {said}")
        else:
            candidates.append(scheme)
            kinds[scheme] = kind
            notes.append(f"{scheme} tried as {said}")
    return candidates, notes, kinds


MAPPED_BLOCKS = ("mapped directly onto the op's form (the codes as they are; scale = d and zero = m + 8d per group "
                 "of 32, only these rounded to bfloat16)")


def device_origin(kind: str, weights: LinearWeightTypes) -> str:
    """How `kind`'s weights are made from the checkpoint's: a kind that maps a host storage (int4_pack) takes the
    blocks that storage holds exactly without rounding their codes again."""
    return origin(HELD_AS[kind], weights, MAPPED_BLOCKS) if kind in MAPPED else origin(kind, weights)


def device_origins(candidates: list[str], kinds: dict[str, str], weights: LinearWeightTypes) -> dict[str, str]:
    """Each device candidate's origin, for auto's row; empty for a float checkpoint (the row then reads as always)."""
    return {s: device_origin(kinds[s], weights) for s in candidates} if has_blocks(weights) else {}


def record_converted(kind: str, weights: LinearWeightTypes, recorder: FallbackRecorder) -> None:
    """A fallback when the file's blocks that a host storage holds exactly must be rounded again for `kind` (int8_pack's
    scale per output channel holds no GGUF block as it is)."""
    mapped = kind in MAPPED
    again = requantized(HELD_AS[kind] if mapped else kind, weights)
    if again:
        types = " and ".join(again)
        why = (f"the {kind} kind holds 4-bit codes per group of 32 (mapped from Q4_0 / Q4_1 blocks), which {types} "
               "blocks are not" if mapped else f"the device kernel's {kind} storage has a scale per output channel, "
               "not one per block of 32: no device kind holds these blocks as they are")
        recorder.record("op", f"{kind} weights", wanted=f"the file's {types} blocks kept as they are",
                        instead=f"them dequantized and quantized again to {kind} once at load (a second rounding)",
                        why=why)


def device_description(kind: str) -> str:
    return DESCRIPTION.get(kind, kind)
