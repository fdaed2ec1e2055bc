"""A Hugging Face `config.json` read into a ModelConfig: the settings every family shares here, then what only the
architecture's family reads (its file in families/ says: llama.py, qwen2.py, ...). Each error is one line
naming the file and the field."""

from __future__ import annotations

from typing import Any

from bringup.errors import BringupError
from bringup.profiles.store import printable
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import MAX_LAYERS, MAX_POSITIONS, Fields, json_type
from bringup.runner.model.config.rope_settings import read_rope_scaling
from bringup.runner.model.families import FAMILIES, MODEL_TYPES, SUPPORTED_ARCHITECTURES


def read_hf_config(cfg: Any, source: str = "config.json") -> ModelConfig:
    """Parse a Hugging Face config dict; BringupError (one line naming the field) for wrong types, sizes
    that cannot describe a model, and architectures this runner cannot run."""
    if not isinstance(cfg, dict):
        raise BringupError(f"{source} must be a JSON object of model settings, got a JSON "
                           f"{json_type(cfg)}; re-download or fix the file")
    fields = Fields(cfg, source)
    arch = _architecture(fields)
    family = FAMILIES[arch]
    act_key, act_served = family.activation
    act = fields.text(act_key, act_served)
    if act != act_served:
        raise BringupError(f"{source}: {act_key} {printable(act)[:40]!r} is not supported "
                           f"(only {act_served!r} for {arch})")
    hidden, heads = fields.size("hidden_size"), fields.size("num_attention_heads")
    kv_heads = fields.size("num_key_value_heads", heads)
    head_dim = fields.size("head_dim", family.head_dim_default)
    _check_heads(source, hidden, heads, kv_heads, head_dim)
    rope_theta, scaling = _rope(fields)
    window = fields.size("sliding_window", None, limit=MAX_POSITIONS)
    config = ModelConfig(
        architecture=arch,
        vocab_size=fields.size("vocab_size"),
        hidden_size=hidden,
        intermediate_size=fields.size("intermediate_size"),
        num_layers=fields.size("num_hidden_layers", limit=MAX_LAYERS),
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim or hidden // heads,
        max_position_embeddings=fields.size("max_position_embeddings", 2048, limit=MAX_POSITIONS),
        rms_norm_eps=fields.positive_number("rms_norm_eps", 1e-6),
        rope_theta=rope_theta,
        rope_scaling=scaling,
        tie_word_embeddings=fields.flag("tie_word_embeddings", False),
        qkv_bias=fields.flag("attention_bias", False),  # a family with fixed biases says so (qwen2.py)
        o_bias=fields.flag("attention_bias", False),
        mlp_bias=fields.flag("mlp_bias", False),
        sliding_window=window,
        bos_token_id=fields.token_id("bos_token_id"),
        eos_token_ids=fields.token_ids("eos_token_id"),
        torch_dtype=fields.text("torch_dtype", None) or fields.text("dtype", None),
        hidden_act=act,
    )
    family.read_config(fields, config)
    return config


def _check_heads(source: str, hidden: int, heads: int, kv_heads: int, head_dim: int | None) -> None:
    if head_dim is None and hidden % heads:
        raise BringupError(f"{source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}, so "
                           "the head size is undefined; fix the file (or give head_dim)")
    if heads % kv_heads:
        raise BringupError(f"{source}: num_attention_heads {heads} is not divisible by num_key_value_heads "
                           f"{kv_heads}; grouped-query attention needs whole groups; fix the file")


def _architecture(fields: Fields) -> str:
    source = fields.source
    archs = fields.get("architectures", [])
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise fields.wrong("architectures", "a list of class names")
    model_type = fields.text("model_type", None)
    if not archs and model_type in MODEL_TYPES:
        archs = [MODEL_TYPES[model_type]]
    for arch in archs:
        if arch in SUPPORTED_ARCHITECTURES:
            return arch
    found = ", ".join(printable(a)[:80] for a in archs[:4]) or f"model_type={printable(repr(model_type))[:80]}"
    raise BringupError(
        f"{source}: architecture {found} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
    )


def _rope(fields: Fields) -> tuple[float, dict[str, Any] | None]:
    """Read rope theta and scaling from either `rope_parameters` (transformers>=5) or `rope_scaling`."""
    params = fields.mapping("rope_parameters")
    scaling = fields.mapping("rope_scaling") or params
    in_params = Fields(params, f"{fields.source}: rope_parameters")
    theta = in_params.positive_number("rope_theta") if in_params.has("rope_theta") else \
        fields.positive_number("rope_theta", 10000.0)
    return theta, read_rope_scaling(scaling, fields.source)
