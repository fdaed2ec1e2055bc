"""llama.cpp's tensor names mapped to the Hugging Face names the families read."""

from __future__ import annotations

import re

from bringup.runner.model.checkpoint import EMBED, FINAL_NORM, LM_HEAD, layer_prefix

TOP_LEVEL = {"token_embd": EMBED.removesuffix(".weight"), "output_norm": FINAL_NORM.removesuffix(".weight"),
             "output": LM_HEAD.removesuffix(".weight")}
IN_LAYER = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
LAYER_TENSOR = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
PLAIN_TENSOR = re.compile(r"(\w+)\.(weight|bias)")
ROPE_PERMUTED = ("attn_q", "attn_k")  # the tensors llama.cpp's llama converter permutes for its rope


def hf_name(gguf_name: str) -> str:
    """The Hugging Face name of a GGUF tensor; a name with no equivalent is returned as it is, so the checks
    against the family's tensors refuse it by its own name."""
    layer = LAYER_TENSOR.fullmatch(gguf_name)
    if layer and layer.group(2) in IN_LAYER:
        return f"{layer_prefix(int(layer.group(1)))}{IN_LAYER[layer.group(2)]}.{layer.group(3)}"
    plain = PLAIN_TENSOR.fullmatch(gguf_name)
    if plain and plain.group(1) in TOP_LEVEL:
        return f"{TOP_LEVEL[plain.group(1)]}.{plain.group(2)}"
    return gguf_name


def rope_permuted(gguf_name: str) -> str | None:
    """'attn_q' or 'attn_k' for a tensor stored permuted for llama.cpp's rope (in a llama file), else None."""
    layer = LAYER_TENSOR.fullmatch(gguf_name)
    return layer.group(2) if layer and layer.group(2) in ROPE_PERMUTED else None
