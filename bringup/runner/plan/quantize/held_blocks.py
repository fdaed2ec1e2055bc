"""The quantization row's account of a checkpoint whose linear weights are quantized already (a GGUF file's blocks),
per block type: the blocks a scheme stores exactly (re-packed, weights/formats/gguf_blocks.py), the blocks it must
round again although another scheme stores them exactly (a recorded fallback: WARNING, counted, refused by --strict),
the blocks no storage here holds exactly (the K-quants, Q5_1: dequantized, then quantized for the scheme as an F16
weight would be, and said so), and what --quantization none does with them (dequantizes them, as always).

The layers' weights decide what is a fallback. llama.cpp's quantizer picks the head's type apart from the layers' (a
Q4_1 file keeps token_embd, the tied head, in Q8_0): a head the scheme cannot hold as it is gets quantized from its
values, as an F16 head would be, and the row says so."""

from __future__ import annotations

from bringup.fallbacks import FallbackRecorder
from bringup.runner.plan.plan import Choice
from bringup.runner.plan.quantize.scheme import QUANTIZED_AT_LOAD, plain_choice
from bringup.runner.weights.formats.gguf_blocks import ROUTES, holds, is_quantized_type
from bringup.runner.weights.held import LinearWeightTypes


def _names(types: list[str]) -> str:
    return " and ".join(types)


def _types(weights: LinearWeightTypes) -> list[str]:
    return sorted(set(weights.layers) | ({weights.head} if weights.head else set()))


def has_blocks(weights: LinearWeightTypes) -> bool:
    return any(is_quantized_type(t) for t in _types(weights))


def requantized(scheme: str, weights: LinearWeightTypes) -> list[str]:
    """The layers' block types that another scheme stores exactly but `scheme` must dequantize and round again."""
    return sorted(t for t in weights.layers if t in ROUTES and not holds(scheme, t))


def _unheld(types: list[str]) -> list[str]:
    """Quantized types no storage here holds exactly (the K-quants, Q5_1)."""
    return [t for t in types if is_quantized_type(t) and t not in ROUTES]


REPACKED = "re-packed (no re-quantization)"


def origin(scheme: str, weights: LinearWeightTypes, kept: str = REPACKED) -> str:
    """How `scheme`'s stored weights are made from the checkpoint's, per type, for its plan row (`kept`: what
    becomes of the blocks it holds exactly)."""
    if not has_blocks(weights):
        return QUANTIZED_AT_LOAD
    types, again = _types(weights), requantized(scheme, weights)
    held = [t for t in types if holds(scheme, t)]
    floats = [t for t in types if not is_quantized_type(t)]
    unheld = _unheld(types)
    head = weights.head
    phrases = [f"from the file's {_names(held)} blocks, {kept}"] if held else []
    if again:
        phrases.append(f"its {_names(again)} blocks dequantized and quantized again (a second rounding: a recorded "
                       "fallback)")
    if head in ROUTES and not holds(scheme, head) and head not in weights.layers:
        phrases.append(f"the head's {head} blocks dequantized and {QUANTIZED_AT_LOAD}")
    if unheld:
        phrases.append(f"its {_names(unheld)} blocks dequantized and {QUANTIZED_AT_LOAD} (no storage here holds "
                       f"{'them' if len(unheld) > 1 else 'it'} exactly)")
    if floats:
        phrases.append(f"its {_names(floats)} weights {QUANTIZED_AT_LOAD}")
    return "; ".join(phrases)


def record_requantized(scheme: str, weights: LinearWeightTypes, recorder: FallbackRecorder) -> None:
    """A fallback when the layers hold blocks `scheme` must round again (a Q8_0 file served as int4)."""
    again = requantized(scheme, weights)
    if again:
        straight = sorted({s for t in again for s in ROUTES[t]})
        recorder.record("op", f"{scheme} weights", wanted=f"the file's {_names(again)} blocks kept as they are",
                        instead=f"them dequantized and quantized again to {scheme} (a second rounding)",
                        why=f"{scheme} storage cannot hold {_names(again)} blocks as they are; --quantization "
                            f"{' or '.join(straight)} loads them straight")


def none_choice(weights: LinearWeightTypes) -> Choice:
    """--quantization none's row: the plan dtype's weights, the file's blocks dequantized to them where it has any."""
    plain = plain_choice()
    blocks = [t for t in _types(weights) if is_quantized_type(t)]
    if not blocks:
        return plain
    return Choice(plain.value, f"{plain.evidence}, the file's {_names(blocks)} blocks dequantized at load")


def auto_candidates_for(candidates: list[str], notes: list[str], weights: LinearWeightTypes) -> list[str]:
    """The candidates --quantization auto may time on this checkpoint: none that would round again blocks another
    scheme stores exactly (a note says why each other is not tried)."""
    kept = []
    for scheme in candidates:
        again = requantized(scheme, weights)
        if again:
            notes.append(f"{scheme} not tried: it would quantize the file's {_names(again)} blocks again "
                         f"(--quantization {scheme} does that, as a recorded fallback)")
        else:
            kept.append(scheme)
    return kept


def held_schemes(candidates: list[str], weights: LinearWeightTypes) -> list[str]:
    """The candidates that store some of the checkpoint's blocks as they are (loaded from the file for auto)."""
    return [s for s in candidates if any(holds(s, t) for t in _types(weights))]


def origins(candidates: list[str], weights: LinearWeightTypes) -> dict[str, str]:
    """Each candidate's origin, for auto's row; empty for a float checkpoint (the row then reads as always)."""
    return {s: origin(s, weights) for s in candidates} if has_blocks(weights) else {}
