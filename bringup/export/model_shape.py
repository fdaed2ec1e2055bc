"""The few numbers of a Hugging Face model directory's config.json that size a launch: attention heads (tensor
parallelism must divide them) and the KV cache's bytes per token. Read as plain JSON, bounded; a config that cannot
be read gives no shape, and the settings that need one are left out with the reason."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

MAX_CONFIG_BYTES = 4 << 20
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass(frozen=True)
class ModelShape:
    layers: int
    heads: int
    kv_heads: int
    head_dim: int

    def kv_bytes_per_token(self, dtype: str) -> int:
        """K and V of every layer for one token, stored in `dtype`."""
        return 2 * self.layers * self.kv_heads * self.head_dim * ELEMENT_BYTES[dtype]

    def describe(self) -> str:
        return f"{self.layers} layers, {self.heads} heads, {self.kv_heads} KV heads of {self.head_dim}"


def _count(config: dict, *names: str) -> int | None:
    for name in names:
        value = config.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def read_shape(model_dir: str) -> tuple[ModelShape | None, str]:
    """(the shape, where it came from) or (None, why not)."""
    path = Path(model_dir) / "config.json"
    try:
        if not path.is_file():
            return None, f"{path} is not a file"
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return None, f"{path} is larger than {MAX_CONFIG_BYTES >> 20} MiB"
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"{path} cannot be read: {type(exc).__name__}"
    if isinstance(config, dict) and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    if not isinstance(config, dict):
        return None, f"{path} does not hold a JSON object"
    layers = _count(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _count(config, "num_attention_heads", "n_head")
    hidden = _count(config, "hidden_size", "n_embd")
    kv_heads = _count(config, "num_key_value_heads") or heads
    head_dim = _count(config, "head_dim") or (hidden // heads if hidden and heads and hidden % heads == 0 else None)
    if not (layers and heads and kv_heads and head_dim):
        return None, f"{path} lacks the layer, head or hidden sizes"
    return ModelShape(layers, heads, kv_heads, head_dim), f"{path}"
