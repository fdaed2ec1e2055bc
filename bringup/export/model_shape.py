"""The few numbers of a Hugging Face model directory's config.json that size a launch: attention heads (tensor
parallelism must divide them) and the KV cache's bytes per token. Read as plain JSON, bounded; a config that cannot
be read gives no shape, and the settings that need one are left out with the reason."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bringup.bounded_file import FileRefused, read_bounded
from bringup.errors import BringupError
from bringup.number_rule import NumberRefused, whole_number
from bringup.terminal_text import shown

MAX_CONFIG_BYTES = 4 << 20
MAX_SIZE = 1 << 20  # a layer, head or hidden count beyond any decoder's (the widest hidden size is ~3 x 10^4)
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


def _count(config: dict, path: Path, *names: str) -> int | None:
    """The first of `names` the config holds, by the number rule (bringup/number_rule.py) within MAX_SIZE; absent or
    null is None, anything else is refused in one line."""
    for name in names:
        value = config.get(name)
        if value is None:
            continue
        try:
            return whole_number(value, f"{path}: {name}", MAX_SIZE, low=1)
        except NumberRefused as exc:
            raise BringupError(f"{shown(exc)}; fix the model's config.json") from None
    return None


def read_shape(model_dir: str) -> tuple[ModelShape | None, str]:
    """(the shape, where it came from) or (None, why not)."""
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(read_bounded(path, MAX_CONFIG_BYTES).decode("utf-8"))
    except FileRefused as exc:
        return None, f"{path} {exc}"
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        return None, f"{path} cannot be read: {type(exc).__name__}"
    if isinstance(config, dict) and isinstance(config.get("text_config"), dict):
        config = config["text_config"]
    if not isinstance(config, dict):
        return None, f"{path} does not hold a JSON object"
    layers = _count(config, path, "num_hidden_layers", "n_layer", "num_layers")
    heads = _count(config, path, "num_attention_heads", "n_head")
    hidden = _count(config, path, "hidden_size", "n_embd")
    kv_heads = _count(config, path, "num_key_value_heads") or heads
    even = hidden and heads and hidden % heads == 0
    head_dim = _count(config, path, "head_dim") or (hidden // heads if even else None)
    if not (layers and heads and kv_heads and head_dim):
        return None, f"{path} lacks the layer, head or hidden sizes"
    return ModelShape(layers, heads, kv_heads, head_dim), f"{path}"
