"""Model configuration: the subset of a Hugging Face `config.json` a Llama-family decoder needs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from bringup.errors import BringupError
from bringup.profiles.store import printable
from bringup.runner.engine.sampling_params import is_integer, is_number

SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM")
_MODEL_TYPES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM"}


@dataclass
class ModelConfig:
    """Shapes and hyper-parameters of a Llama-family decoder."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict[str, Any] | None = None  # {"rope_type": "llama3", "factor": ..., ...} or None
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int | None = None
    bos_token_id: int | None = None
    eos_token_ids: list[int] = field(default_factory=list)
    torch_dtype: str | None = None

    @property
    def num_queries_per_kv(self) -> int:
        return self.num_heads // self.num_kv_heads

    @classmethod
    def from_hf(cls, cfg: Any, source: str = "config.json") -> ModelConfig:
        """Parse a Hugging Face config dict; BringupError (one line naming the field) for wrong types, sizes
        that cannot describe a model, and architectures this runner cannot run."""
        if not isinstance(cfg, dict):
            raise BringupError(f"{source} must be a JSON object of model settings, got a JSON "
                               f"{_json_type(cfg)}; re-download or fix the file")
        fields = _Fields(cfg, source)
        arch = _architecture(fields)
        act = fields.text("hidden_act", "silu")
        if act != "silu":
            raise BringupError(f"{source}: hidden_act {printable(act)[:40]!r} is not supported "
                               "(only 'silu', SwiGLU MLP)")
        hidden, heads = fields.size("hidden_size"), fields.size("num_attention_heads")
        kv_heads = fields.size("num_key_value_heads", heads)
        head_dim = fields.size("head_dim", None)
        _check_heads(source, hidden, heads, kv_heads, head_dim)
        rope_theta, scaling = _rope(fields)
        window = fields.size("sliding_window", None, limit=MAX_POSITIONS)
        if arch == "Qwen2ForCausalLM" and not fields.flag("use_sliding_window", False):
            window = None
        return cls(
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
            qkv_bias=arch == "Qwen2ForCausalLM" or fields.flag("attention_bias", False),
            o_bias=arch != "Qwen2ForCausalLM" and fields.flag("attention_bias", False),
            mlp_bias=fields.flag("mlp_bias", False),
            sliding_window=window,
            bos_token_id=fields.token_id("bos_token_id"),
            eos_token_ids=fields.token_ids("eos_token_id"),
            torch_dtype=fields.text("torch_dtype", None) or fields.text("dtype", None),
        )


MAX_SIZE = 2**20  # hidden, intermediate, heads, head_dim, vocab: far above any published model, far below a bomb
MAX_LAYERS = 2**12
MAX_POSITIONS = 2**24
_REQUIRED = object()


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


@dataclass
class _Fields:
    """Typed reads from one JSON object; each error is one line naming the file and the field."""

    cfg: dict[str, Any]
    source: str

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def get(self, key: str, default: Any) -> Any:
        if self.has(key):
            return self.cfg[key]
        if default is _REQUIRED:
            raise BringupError(f"{self.source}: required key {key!r} is missing; is this a Llama-family config.json?")
        return default

    def wrong(self, key: str, what: str) -> BringupError:
        value = repr(self.cfg[key])
        shown = value if len(value) <= 40 else value[:37] + "..."
        return BringupError(f"{self.source}: {key} must be {what}, got {shown} (a JSON {_json_type(self.cfg[key])}); "
                            "fix the file or re-download the model")

    def size(self, key: str, default: Any = _REQUIRED, limit: int = MAX_SIZE) -> Any:
        """A positive integer no larger than `limit` (null or absent: `default`)."""
        if not self.has(key):
            return self.get(key, default)
        value = self.cfg[key]
        if not is_integer(value) or not 1 <= value <= limit:
            raise self.wrong(key, f"a positive integer (at most {limit})")
        return value

    def positive_number(self, key: str, default: Any = _REQUIRED) -> float:
        if not self.has(key):
            return self.get(key, default)
        value = self.cfg[key]
        if not is_number(value) or not 0 < value < math.inf:
            raise self.wrong(key, "a positive finite number")
        return float(value)

    def flag(self, key: str, default: bool) -> bool:
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise self.wrong(key, "true or false")
        return value

    def text(self, key: str, default: str | None) -> Any:
        value = self.get(key, default)
        if value is not default and not isinstance(value, str):
            raise self.wrong(key, "a string")
        return value

    def mapping(self, key: str) -> dict[str, Any]:
        value = self.get(key, {})
        if not isinstance(value, dict):
            raise self.wrong(key, "a JSON object")
        return dict(value)

    def token_id(self, key: str) -> int | None:
        value = self.get(key, None)
        if value is not None and not (is_integer(value) and value >= 0):
            raise self.wrong(key, "a non-negative integer token id")
        return value

    def token_ids(self, key: str) -> list[int]:
        """A token id or a list of them (absent or null: none)."""
        value = self.get(key, [])
        ids = value if isinstance(value, list) else [value]
        if not all(is_integer(i) and i >= 0 for i in ids):
            raise self.wrong(key, "a non-negative integer token id or a list of them")
        return ids


def _check_heads(source: str, hidden: int, heads: int, kv_heads: int, head_dim: int | None) -> None:
    if head_dim is None and hidden % heads:
        raise BringupError(f"{source}: hidden_size {hidden} is not divisible by num_attention_heads {heads}, so "
                           "the head size is undefined; fix the file (or give head_dim)")
    if heads % kv_heads:
        raise BringupError(f"{source}: num_attention_heads {heads} is not divisible by num_key_value_heads "
                           f"{kv_heads}; grouped-query attention needs whole groups; fix the file")


def _architecture(fields: _Fields) -> str:
    source = fields.source
    archs = fields.get("architectures", [])
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise fields.wrong("architectures", "a list of class names")
    model_type = fields.text("model_type", None)
    if not archs and model_type in _MODEL_TYPES:
        archs = [_MODEL_TYPES[model_type]]
    for arch in archs:
        if arch in SUPPORTED_ARCHITECTURES:
            return arch
    found = ", ".join(printable(a)[:80] for a in archs[:4]) or f"model_type={printable(repr(model_type))[:80]}"
    raise BringupError(
        f"{source}: architecture {found} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
    )


def _rope(fields: _Fields) -> tuple[float, dict[str, Any] | None]:
    """Read rope theta and scaling from either `rope_parameters` (transformers>=5) or `rope_scaling`."""
    params = fields.mapping("rope_parameters")
    scaling = fields.mapping("rope_scaling") or params
    in_params = _Fields(params, f"{fields.source}: rope_parameters")
    theta = in_params.positive_number("rope_theta") if in_params.has("rope_theta") else \
        fields.positive_number("rope_theta", 10000.0)
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type in (None, "default"):
        return theta, None
    if rope_type != "llama3":
        raise BringupError(f"{fields.source}: rope scaling type {str(rope_type)[:40]!r} is not supported "
                           "(only 'llama3')")
    where = _Fields(scaling, f"{fields.source}: rope scaling")
    where.positive_number("factor")
    low, high = where.positive_number("low_freq_factor", 1.0), where.positive_number("high_freq_factor", 4.0)
    where.positive_number("original_max_position_embeddings", 8192.0)
    if low == high:
        raise BringupError(f"{fields.source}: rope scaling has high_freq_factor equal to low_freq_factor, which "
                           "divides by zero; fix the file")
    return theta, {**scaling, "rope_type": "llama3"}
