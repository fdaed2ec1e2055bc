"""A GGUF file's hyper-parameters as the config.json a Hugging Face directory of the same model has, read by
`read_hf_config` so every check a config.json gets applies (key names as llama.cpp's converter writes them)."""

from __future__ import annotations

from typing import Any

from bringup.errors import BringupError
from bringup.runner.model.config import ModelConfig
from bringup.runner.sources.directory.hf_config import read_hf_config
from bringup.runner.sources.gguf import metadata
from bringup.runner.sources.gguf.architectures import architecture
from bringup.runner.sources.gguf.reader import GGUFFile

TOKENS = "tokenizer.ggml.tokens"


def read_gguf_config(file: GGUFFile) -> ModelConfig:
    return read_hf_config(config_dict(file), source=f"{file.path} (its metadata read as a config.json)")


def config_dict(file: GGUFFile) -> dict[str, Any]:
    """The config.json settings the file's metadata implies."""
    arch = architecture(file)
    a = arch.name
    cfg: dict[str, Any] = {
        "architectures": [arch.hf_architecture],
        "model_type": arch.model_type,
        "hidden_size": metadata.integer(file, f"{a}.embedding_length"),
        "intermediate_size": metadata.integer(file, f"{a}.feed_forward_length"),
        "num_hidden_layers": metadata.integer(file, f"{a}.block_count"),
        "num_attention_heads": metadata.integer(file, f"{a}.attention.head_count"),
        "num_key_value_heads": metadata.integer(file, f"{a}.attention.head_count_kv",
                                                metadata.integer(file, f"{a}.attention.head_count")),
        "max_position_embeddings": metadata.integer(file, f"{a}.context_length"),
        "rms_norm_eps": metadata.number(file, f"{a}.attention.layer_norm_rms_epsilon"),
        "rope_theta": metadata.number(file, f"{a}.rope.freq_base", 10000.0),
        "vocab_size": _vocab_size(file, a),
        "tie_word_embeddings": "output.weight" not in file.tensors,
        "attention_bias": "blk.0.attn_q.bias" in file.tensors,
        "mlp_bias": "blk.0.ffn_gate.bias" in file.tensors,
        "hidden_act": "silu",
        "bos_token_id": metadata.integer(file, "tokenizer.ggml.bos_token_id", None),
        "eos_token_id": metadata.integer(file, "tokenizer.ggml.eos_token_id", None),
    }
    head_dim = _head_dim(file, a)
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    scaling = metadata.text(file, f"{a}.rope.scaling.type", "none")
    if scaling != "none":  # read_hf_config names the types it cannot run
        cfg["rope_scaling"] = {"rope_type": scaling, "factor": metadata.number(file, f"{a}.rope.scaling.factor", 1.0)}
    if a == "gemma3":
        del cfg["hidden_act"]  # Gemma's config.json names it hidden_activation
        cfg |= _gemma3(file, cfg)
    return cfg


def _gemma3(file: GGUFFile, cfg: dict[str, Any]) -> dict[str, Any]:
    """What a Gemma 3 file adds, and what it leaves out: the converter writes no layer pattern, no local rope base
    and no attention scale, so these are llama.cpp's (src/llama-model.cpp, LLM_ARCH_GEMMA3) and transformers'
    (its GGUF reader and Gemma3TextConfig) defaults: every 6th layer global, the local layers' rope base 10000
    unscaled. The attention scale is llama.cpp's 1/sqrt(head_dim), and 1/sqrt(hidden / heads) for the 27B (62
    layers) as in Google's config; transformers always takes query_pre_attn_scalar 256: head_dim but for the 27B.
    rope.scaling (linear 8 in the 4B and up) applies to the global layers, as llama.cpp applies it."""
    heads = cfg["num_attention_heads"]
    per_head = cfg["hidden_size"] // heads if heads > 0 else 0  # 0 heads: read_hf_config refuses the count first
    return {"hidden_activation": "gelu_pytorch_tanh", "sliding_window_pattern": 6, "rope_local_base_freq": 10000.0,
            "sliding_window": metadata.integer(file, "gemma3.attention.sliding_window"),
            "query_pre_attn_scalar": per_head if cfg["num_hidden_layers"] == 62 else cfg.get("head_dim", per_head)}


def _head_dim(file: GGUFFile, a: str) -> int | None:
    """attention.key_length when given; llama.cpp's llama files give only the rope dimension, which is the head
    size there (a rope over part of the head is refused: no family here runs one)."""
    key_length = metadata.integer(file, f"{a}.attention.key_length", None)
    rope_dims = metadata.integer(file, f"{a}.rope.dimension_count", None)
    head_dim = key_length if key_length is not None else rope_dims if a == "llama" else None
    if rope_dims is not None and head_dim is not None and rope_dims != head_dim:
        raise BringupError(f"{file.path}: {a}.rope.dimension_count {rope_dims} differs from the head size "
                           f"{head_dim}; rope over part of each head is not supported")
    return head_dim


def _vocab_size(file: GGUFFile, a: str) -> Any:
    """{arch}.vocab_size when given, else the number of tokens, else the embedding's rows."""
    given = metadata.integer(file, f"{a}.vocab_size", None)
    if given is not None:
        return given
    if TOKENS in file.metadata:
        return len(metadata.texts(file, TOKENS))
    embedding = file.tensors.get("token_embd.weight")
    if embedding is None:
        raise BringupError(f"{file.path}: neither {a}.vocab_size, {TOKENS} nor token_embd.weight says the "
                           "vocabulary size; the file is incomplete: re-convert it")
    return int(embedding.shape[-1])
