"""What a pre-quantized checkpoint (compressed-tensors, as vLLM reads it) holds, as plain data, and the tensors it
stores in place of each quantized linear weight.

compressed-tensors replaces a Linear module M's `M.weight` by (quantization_config.py reads which format):
  float-quantized (fp8):  M.weight [out, in] F8_E4M3 and M.weight_scale, [out, 1] per channel or [1] per tensor;
  int-quantized (int8):   M.weight [out, in] I8 and M.weight_scale [out, 1];
  pack-quantized (int8):  M.weight_packed [out, in / 4] I32 (four codes per word, code j of a word in bits 8j..8j+7,
                          stored plus 128), M.weight_shape [2] (out, in) and M.weight_scale [out, 1];
  pack-quantized (int4):  the same with eight 4-bit codes per word (code j in bits 4j..4j+3, stored plus 8), and
                          M.weight_scale [out, in / G] for groups of G inputs (W4A16), or [out, 1] per channel.
In every one w = weight_scale * q (symmetric, no zero point). Modules named by the config's `ignore` keep a plain
float `M.weight`; the embedding and the norms are never quantized.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.runner.weights.formats.compressed_tensors.ignore_rules import IgnoreRules

FLOAT_QUANTIZED, INT_QUANTIZED, PACK_QUANTIZED = "float-quantized", "int-quantized", "pack-quantized"
CHANNEL, TENSOR, GROUP = "channel", "tensor", "group"
SCALE_DTYPES = ("F32", "F16", "BF16")
CODE_DTYPES = {FLOAT_QUANTIZED: ("F8_E4M3",), INT_QUANTIZED: ("I8",), PACK_QUANTIZED: ("I32",)}
WORD_BITS = 32  # pack-quantized codes fill int32 words: 32 / num_bits of them each
SHAPE_DTYPES = ("I32", "I64")
EMBEDDING = "model.embed_tokens"


@dataclass(frozen=True)
class StoredQuantization:
    """A checkpoint's own quantization, read from its config.json's quantization_config."""

    source: str  # the model directory, for messages
    format: str  # FLOAT_QUANTIZED, INT_QUANTIZED or PACK_QUANTIZED
    scheme: str  # the math: "fp8" or "int8"
    strategy: str  # CHANNEL, TENSOR or GROUP (a scale per output channel, one for the whole weight, per group)
    dynamic_activations: bool  # the checkpoint asks for activations quantized per token at run time (not applied)
    ignore: IgnoreRules = field(default_factory=IgnoreRules)  # the modules left unquantized
    bits: int = 8  # bits per code
    group_size: int | None = None  # inputs per scale, with the GROUP strategy

    def describe(self) -> str:
        per = {CHANNEL: "a scale per output channel", TENSOR: "one scale per weight",
               GROUP: f"a scale per group of {self.group_size} inputs"}[self.strategy]
        return f"compressed-tensors {self.format} {self.scheme} weights ({per}, symmetric)"

    @property
    def codes_per_word(self) -> int:
        """pack-quantized: the codes each int32 word holds."""
        return WORD_BITS // self.bits

    def scale_shape(self, out: int, inputs: int) -> tuple[int, ...]:
        """The weight_scale a quantized [out, inputs] weight stores."""
        if self.strategy == GROUP:
            return out, -(-inputs // int(self.group_size or 1))
        return (out, 1) if self.strategy == CHANNEL else (1,)

    def quantizes(self, module: str) -> bool:
        """Whether the checkpoint stores linear module `module` (e.g. model.layers.0.mlp.down_proj) quantized."""
        return not self.ignore.ignores(module)

    @property
    def weight_name(self) -> str:
        """The suffix of a quantized module's code tensor."""
        return "weight_packed" if self.format == PACK_QUANTIZED else "weight"


def linear_module(name: str, shape: tuple[int, ...]) -> str | None:
    """The module whose weight `name` is, when it is a linear layer's (2-D, not the embedding); else None."""
    if len(shape) != 2 or not name.endswith(".weight"):
        return None
    module = name.removesuffix(".weight")
    return None if module == EMBEDDING else module


def stored_shapes(q: StoredQuantization, expected: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]]:
    """`expected` (the unquantized checkpoint's tensors and shapes) with each quantized linear weight replaced by
    the tensors the checkpoint stores for it."""
    shapes: dict[str, tuple[int, ...]] = {}
    for name, shape in expected.items():
        module = linear_module(name, shape)
        if module is None or not q.quantizes(module):
            shapes[name] = shape
            continue
        out, inp = shape
        shapes[f"{module}.weight_scale"] = q.scale_shape(out, inp)
        if q.format == PACK_QUANTIZED:
            shapes[f"{module}.weight_packed"] = (out, -(-inp // q.codes_per_word))
            shapes[f"{module}.weight_shape"] = (2,)
        else:
            shapes[name] = shape
    return shapes


def stored_dtypes(q: StoredQuantization, name: str, expected: dict[str, tuple[int, ...]]) -> tuple[str, ...] | None:
    """The safetensors dtypes the checkpoint may store tensor `name` in, or None for a plain float tensor."""
    module, _, part = name.rpartition(".")
    weight = expected.get(f"{module}.weight")
    if weight is None or linear_module(f"{module}.weight", weight) is None or not q.quantizes(module):
        return None
    return {"weight": CODE_DTYPES[q.format], "weight_packed": CODE_DTYPES[q.format], "weight_scale": SCALE_DTYPES,
            "weight_shape": SHAPE_DTYPES}.get(part)
