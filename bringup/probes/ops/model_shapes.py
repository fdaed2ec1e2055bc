"""The shapes of a model, read from its Hugging Face config.json, for `verify-ops --model DIR`.

Only shape fields are read, directly (no transformers class is built), so any decoder whose config has them
works. ModelShapes travels to the isolated workers as JSON in BRINGUP_OPS_MODEL (see catalog/__init__.py).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.runner.model_files import has_entry, read_json

DEFAULT_MAX_POSITIONS = 4096


class ModelConfigError(ValueError):
    """config.json is missing, unreadable, or lacks a shape verify-ops needs (one line for the user)."""


@dataclass(frozen=True)
class ModelShapes:
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    max_positions: int
    intermediate: int | None = None
    moe_intermediate: int | None = None
    experts: int | None = None
    top_k: int | None = None
    renormalize_topk: bool = True
    sliding_window: int | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    rope_theta: float = 10000.0
    rotary_dim: int | None = None
    activation: str = "silu"
    dtype: str | None = None
    model_type: str = "unknown"

    @property
    def is_moe(self) -> bool:
        return bool(self.experts and self.top_k)

    def summary(self) -> str:
        text = (f"{self.model_type}: hidden={self.hidden} heads={self.heads}/{self.kv_heads} "
                f"head_dim={self.head_dim} vocab={self.vocab} max_positions={self.max_positions}")
        if self.intermediate:
            text += f" intermediate={self.intermediate}"
        if self.is_moe:
            text += f" experts={self.experts} top-{self.top_k} expert_intermediate={self.expert_intermediate}"
        if self.sliding_window:
            text += f" sliding_window={self.sliding_window}"
        if self.attn_softcap or self.final_softcap:
            text += f" softcap={self.attn_softcap}/{self.final_softcap}"
        return text

    @property
    def expert_intermediate(self) -> int | None:
        return self.moe_intermediate or self.intermediate

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelShapes:
        data = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _positive_int(config: dict[str, Any], *names: str, required: bool = False, where: str = "") -> int | None:
    for name in names:
        value = config.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ModelConfigError(f"{where}: {name} is {value!r}, not a positive integer; fix the config")
        return value
    if required:
        raise ModelConfigError(f"{where} has no {' / '.join(names)}; verify-ops --model needs a decoder's Hugging "
                               "Face config.json with the model's shapes")
    return None


def _positive_float(config: dict[str, Any], name: str) -> float | None:
    value = config.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _rope_theta(config: dict[str, Any]) -> float:
    params = config.get("rope_parameters")
    if isinstance(params, dict) and isinstance(params.get("rope_theta"), (int, float)):
        return float(params["rope_theta"])
    theta = config.get("rope_theta")
    return float(theta) if isinstance(theta, (int, float)) and theta > 0 else 10000.0


def shapes_from_config(config: dict[str, Any], where: str = "config.json") -> ModelShapes:
    """ModelShapes from a config dict (a multimodal config's text_config is used when the top level has none)."""
    if "hidden_size" not in config and isinstance(config.get("text_config"), dict):
        config = {**config["text_config"], "torch_dtype": config.get("torch_dtype", config.get("dtype"))}
    hidden = _positive_int(config, "hidden_size", "n_embd", required=True, where=where)
    heads = _positive_int(config, "num_attention_heads", "n_head", required=True, where=where)
    vocab = _positive_int(config, "vocab_size", required=True, where=where)
    kv_heads = _positive_int(config, "num_key_value_heads", where=where) or heads
    head_dim = _positive_int(config, "head_dim", where=where) or hidden // heads
    if heads % kv_heads:
        raise ModelConfigError(f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads "
                               f"{kv_heads}; fix the config")
    experts = _positive_int(config, "num_local_experts", "num_experts", "n_routed_experts", where=where)
    top_k = _positive_int(config, "num_experts_per_tok", "moe_topk", where=where)
    window = _positive_int(config, "sliding_window", where=where)
    if config.get("use_sliding_window") is False:
        window = None
    factor = config.get("partial_rotary_factor")
    rotary_dim = None
    if isinstance(factor, (int, float)) and 0 < factor < 1:
        rotary_dim = max(2, int(head_dim * factor) // 2 * 2)
    dtype = config.get("torch_dtype", config.get("dtype"))
    activation = str(config.get("hidden_activation") or config.get("hidden_act") or "silu")
    norm_topk = config.get("norm_topk_prob")
    return ModelShapes(
        hidden=hidden, heads=heads, kv_heads=kv_heads, head_dim=head_dim, vocab=vocab,
        max_positions=_positive_int(config, "max_position_embeddings", "n_positions", where=where)
        or DEFAULT_MAX_POSITIONS,
        intermediate=_positive_int(config, "intermediate_size", where=where),
        moe_intermediate=_positive_int(config, "moe_intermediate_size", where=where),
        experts=experts, top_k=top_k,
        renormalize_topk=True if norm_topk is None else bool(norm_topk),
        sliding_window=window,
        attn_softcap=_positive_float(config, "attn_logit_softcapping"),
        final_softcap=_positive_float(config, "final_logit_softcapping"),
        rope_theta=_rope_theta(config), rotary_dim=rotary_dim, activation=activation,
        dtype=dtype if isinstance(dtype, str) else None,
        model_type=str(config.get("model_type") or "unknown"),
    )


def read_model_shapes(model_dir: Path) -> ModelShapes:
    """ModelShapes from DIR/config.json; ModelConfigError with one line when it cannot."""
    path = Path(model_dir) / "config.json"
    if not Path(model_dir).is_dir():
        raise ModelConfigError(f"--model {model_dir}: not a directory; give a Hugging Face model directory "
                               "(with config.json)")
    if not has_entry(Path(model_dir), "config.json"):
        raise ModelConfigError(f"--model {model_dir}: no config.json there; give a Hugging Face model directory")
    try:
        config = read_json(Path(model_dir), "config.json")  # the model directory's jail (model_files.py)
    except BringupError as exc:
        raise ModelConfigError(str(exc)) from None
    if not isinstance(config, dict):
        raise ModelConfigError(f"{path} is not a JSON object; give a Hugging Face config.json")
    return shapes_from_config(config, str(path))
