"""How a GGUF file stores the weights of the model's linear layers (held_weights.LinearWeightTypes): the layers'
projections counted per GGML type, and the head's type (output.weight, or token_embd.weight when the head is tied
to the embedding). llama.cpp's quantizer picks the head's type apart from the layers' (a Q4_1 file often keeps
token_embd in Q8_0)."""

from __future__ import annotations

from collections import Counter

from bringup.runner.sources.gguf.reader import GGUFFile
from bringup.runner.sources.gguf.tensor_names import IN_LAYER, LAYER_TENSOR
from bringup.runner.weights.held import LinearWeightTypes

HEAD, EMBEDDING = "output.weight", "token_embd.weight"
PROJECTIONS = {name for name, hf in IN_LAYER.items() if hf.endswith("_proj")}  # attn_q ... ffn_down, not the norms


def linear_weight_types(file: GGUFFile) -> LinearWeightTypes:
    layers = Counter(tensor.tensor_type.name for name, tensor in file.tensors.items()
                     if (m := LAYER_TENSOR.fullmatch(name)) and m.group(3) == "weight" and m.group(2) in PROJECTIONS)
    head = file.tensors.get(HEAD, file.tensors.get(EMBEDDING))
    return LinearWeightTypes(dict(sorted(layers.items())), None if head is None else head.tensor_type.name)
