"""llama.cpp's tensor names mapped to the Hugging Face names the families read (llama's, and Gemma's own)."""

from __future__ import annotations

import re
from dataclasses import replace

from bringup.errors import BringupError
from bringup.runner.model.checkpoint import EMBED, FINAL_NORM, LM_HEAD, layer_prefix
from bringup.runner.sources.gguf.reader import GGUFFile

TOP_LEVEL = {"token_embd": EMBED.removesuffix(".weight"), "output_norm": FINAL_NORM.removesuffix(".weight"),
             "output": LM_HEAD.removesuffix(".weight")}
IN_LAYER = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
# Gemma's files (llama.cpp's converter) name four norms per layer; their `ffn_norm` is the norm before the MLP
GEMMA_IN_LAYER = IN_LAYER | {"post_attention_norm": "post_attention_layernorm", "ffn_norm": "pre_feedforward_layernorm",
                             "post_ffw_norm": "post_feedforward_layernorm"}
LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
PLAIN_TENSOR = re.compile(r"(\w+)\.(weight|bias)")
ROPE_PERMUTED = ("attn_q", "attn_k")  # the tensors llama.cpp's llama converter permutes for its rope


def hf_name(gguf_name: str, in_layer: dict[str, str] = IN_LAYER) -> str:
    """The Hugging Face name of a GGUF tensor (`in_layer`: the architecture's names within a layer); a name with no
    equivalent is returned as it is, so the checks against the family's tensors refuse it by its own name."""
    layer = LAYER_TENSOR.fullmatch(gguf_name)
    if layer and layer.group(2) in in_layer:
        return f"{layer_prefix(int(layer.group(1)))}{in_layer[layer.group(2)]}.{layer.group(3)}"
    plain = PLAIN_TENSOR.fullmatch(gguf_name)
    if plain and plain.group(1) in TOP_LEVEL:
        return f"{TOP_LEVEL[plain.group(1)]}.{plain.group(2)}"
    return gguf_name


def by_hf_names(file: GGUFFile, in_layer: dict[str, str]) -> GGUFFile:
    """`file` as tensors.py reads it (by llama's names): unchanged for llama's names; for an architecture with its own
    (Gemma), every tensor keyed by its Hugging Face name already, which llama's map passes through as it is."""
    if in_layer == IN_LAYER:
        return file
    tensors = {}
    for name, tensor in file.tensors.items():
        hf = hf_name(name, in_layer)
        if hf in tensors:
            raise BringupError(f"{file.path}: two tensors map to {hf!r}; the file is corrupt: re-convert it")
        tensors[hf] = tensor
    return replace(file, tensors=tensors)


def rope_permuted(gguf_name: str) -> str | None:
    """'attn_q' or 'attn_k' for a tensor stored permuted for llama.cpp's rope (in a llama file), else None."""
    layer = LAYER_TENSOR.fullmatch(gguf_name)
    return layer.group(2) if layer and layer.group(2) in ROPE_PERMUTED else None
