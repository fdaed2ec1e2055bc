"""Tiny GGUF files for the tests, written with gguf.GGUFWriter as llama.cpp's converter writes them: a random-init
transformers model's weights (llama's q and k rows permuted for llama.cpp's rope), its hyper-parameters, and the
test tokenizer's byte-level BPE vocabulary, merges and chat template."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package (pip install 'bringup[gguf]')")
T = gguf.GGMLQuantizationType

HF_TO_GGUF = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate",
              "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
PRE = {"llama": "gpt-2", "qwen2": "qwen2", "qwen3": "qwen2"}

QUANTIZABLE = (T.BF16, T.Q8_0, T.Q5_0, T.Q4_0, T.Q4_1)
TypeFor = Callable[[str, torch.Tensor], Any]  # the GGML type a tensor is written in, by its GGUF name
Vocabulary = Callable[[list[str], list[str]], tuple[list[str], list[str]]]  # (tokens, merges) -> what is written


NO_PRE = "<absent>"  # write_gguf(pre=NO_PRE): a file without tokenizer.ggml.pre, as some converters write them


def gguf_name(hf_name: str) -> str:
    stem, kind = hf_name.rsplit(".", 1)
    if stem in TOP:
        return f"{TOP[stem]}.{kind}"
    _, _, layer, rest = stem.split(".", 3)
    return f"blk.{layer}.{HF_TO_GGUF[rest]}.{kind}"


def permute_for_gguf_rope(weight: np.ndarray, heads: int) -> np.ndarray:
    """What llama.cpp's converter does to llama's q and k: each head's two halves interleaved in pairs."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2) \
        .reshape(weight.shape)


def mixed_types(name: str, tensor: torch.Tensor) -> Any:
    """Norms and biases in F32, the embedding in Q8_0, layer 0 in F16, other layers alternating Q8_0 and F16."""
    if tensor.dim() == 1:
        return T.F32
    if name.startswith("token_embd"):
        return T.Q8_0
    layer = int(name.split(".")[1]) if name.startswith("blk.") else 1
    return T.F16 if layer % 2 == 0 else T.Q8_0


def write_gguf(path: Path, hf: torch.nn.Module, tokenizer_dir: Path, arch: str, type_for: TypeFor = mixed_types,
               *, written_arch: str | None = None, tokenizer_model: str = "gpt2", pre: str | None = None,
               skip: tuple[str, ...] = (), add_bos: bool = False, texts: dict[str, str] | None = None,
               vocabulary: Vocabulary | None = None) -> Path:
    """`hf` (a transformers model) and the tokenizer saved in `tokenizer_dir` written to `path` as GGUF. For the
    refusal tests: `written_arch` names another architecture, `tokenizer_model` / `pre` another tokenizer or text
    split, `skip` leaves tensors out (by GGUF name); `add_bos` sets tokenizer.ggml.add_bos_token, `texts` adds
    string keys (a named chat template), `vocabulary` rewrites the tokens and merges; a type_for that gives a type
    gguf cannot quantize writes random bytes of that type's size."""
    c = hf.config
    writer = gguf.GGUFWriter(str(path), written_arch or arch)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    for key, value in {"block_count": c.num_hidden_layers, "context_length": c.max_position_embeddings,
                       "embedding_length": c.hidden_size, "feed_forward_length": c.intermediate_size,
                       "attention.head_count": c.num_attention_heads,
                       "attention.head_count_kv": c.num_key_value_heads}.items():
        writer.add_uint32(f"{arch}.{key}", value)
    writer.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", c.rms_norm_eps)
    writer.add_float32(f"{arch}.rope.freq_base", float(getattr(c, "rope_theta", None)
                                                          or c.rope_parameters["rope_theta"]))
    writer.add_uint32(f"{arch}.rope.dimension_count", head_dim)
    if arch == "qwen3":
        writer.add_uint32(f"{arch}.attention.key_length", head_dim)
    _write_tokenizer(writer, tokenizer_dir, tokenizer_model, pre or PRE[arch], add_bos, vocabulary)
    for key, value in (texts or {}).items():
        writer.add_string(key, value)
    for hf_name, tensor in hf.state_dict().items():
        name = gguf_name(hf_name)
        if (hf_name == "lm_head.weight" and c.tie_word_embeddings) or name in skip:
            continue
        values = tensor.detach().float().numpy()
        if arch == "llama" and (".attn_q." in name or ".attn_k." in name):
            heads = c.num_attention_heads if ".attn_q." in name else c.num_key_value_heads
            values = permute_for_gguf_rope(values, heads)
        kind = type_for(name, tensor)
        data = values.astype(np.float16) if kind == T.F16 else values if kind == T.F32 else \
            gguf.quants.quantize(values, kind) if kind in QUANTIZABLE else random_bytes(values.shape, kind)
        writer.add_tensor(name, data, raw_dtype=None if kind in (T.F16, T.F32) else kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def random_bytes(shape: tuple[int, ...], kind: Any) -> np.ndarray:
    """Bytes the size a tensor of `shape` takes in `kind` (a type gguf can describe but not quantize)."""
    block, size = gguf.GGML_QUANT_SIZES[kind]
    return np.random.default_rng(0).integers(0, 256, (*shape[:-1], shape[-1] // block * size), dtype=np.uint8)


def _write_tokenizer(writer: Any, tokenizer_dir: Path, model: str, pre: str, add_bos: bool,
                     vocabulary: Vocabulary | None) -> None:
    saved = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    config = json.loads((tokenizer_dir / "tokenizer_config.json").read_text())
    vocab = saved["model"]["vocab"]
    tokens = sorted(vocab, key=vocab.__getitem__)
    specials = {t["content"] for t in saved["added_tokens"] if t["special"]}
    merges = [m if isinstance(m, str) else " ".join(m) for m in saved["model"]["merges"]]
    if vocabulary is not None:
        tokens, merges = vocabulary(tokens, merges)
    writer.add_string("tokenizer.ggml.model", model)
    if pre != NO_PRE:
        writer.add_string("tokenizer.ggml.pre", pre)
    writer.add_array("tokenizer.ggml.tokens", tokens)
    writer.add_array("tokenizer.ggml.token_type", [3 if t in specials else 1 for t in tokens])
    writer.add_array("tokenizer.ggml.merges", merges)
    writer.add_uint32("tokenizer.ggml.bos_token_id", vocab["<s>"])
    writer.add_uint32("tokenizer.ggml.eos_token_id", vocab["</s>"])
    writer.add_bool("tokenizer.ggml.add_bos_token", add_bos)
    writer.add_string("tokenizer.chat_template", config["chat_template"])
