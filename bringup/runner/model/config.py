"""Model configuration: the subset of a Hugging Face `config.json` a Llama-family decoder needs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bringup.errors import BringupError

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
    def from_hf(cls, cfg: dict[str, Any], source: str = "config.json") -> ModelConfig:
        """Parse a Hugging Face config dict; BringupError for architectures this runner cannot run."""
        arch = _architecture(cfg, source)
        try:
            hidden = int(cfg["hidden_size"])
            heads = int(cfg["num_attention_heads"])
            kv_heads = int(cfg.get("num_key_value_heads") or heads)
            act = cfg.get("hidden_act", "silu")
            if act != "silu":
                raise BringupError(f"{source}: hidden_act {act!r} is not supported (only 'silu', SwiGLU MLP)")
            rope_theta, scaling = _rope(cfg)
            window = cfg.get("sliding_window")
            if arch == "Qwen2ForCausalLM" and not cfg.get("use_sliding_window", False):
                window = None
            eos = cfg.get("eos_token_id")
            return cls(
                architecture=arch,
                vocab_size=int(cfg["vocab_size"]),
                hidden_size=hidden,
                intermediate_size=int(cfg["intermediate_size"]),
                num_layers=int(cfg["num_hidden_layers"]),
                num_heads=heads,
                num_kv_heads=kv_heads,
                head_dim=int(cfg.get("head_dim") or hidden // heads),
                max_position_embeddings=int(cfg.get("max_position_embeddings", 2048)),
                rms_norm_eps=float(cfg.get("rms_norm_eps", 1e-6)),
                rope_theta=rope_theta,
                rope_scaling=scaling,
                tie_word_embeddings=bool(cfg.get("tie_word_embeddings", False)),
                qkv_bias=arch == "Qwen2ForCausalLM" or bool(cfg.get("attention_bias", False)),
                o_bias=arch != "Qwen2ForCausalLM" and bool(cfg.get("attention_bias", False)),
                mlp_bias=bool(cfg.get("mlp_bias", False)),
                sliding_window=int(window) if window else None,
                bos_token_id=cfg.get("bos_token_id"),
                eos_token_ids=[] if eos is None else ([eos] if isinstance(eos, int) else list(eos)),
                torch_dtype=cfg.get("torch_dtype") or cfg.get("dtype"),
            )
        except KeyError as exc:
            raise BringupError(
                f"{source}: required key {exc.args[0]!r} is missing; is this a Llama-family config.json?"
            ) from None


def _architecture(cfg: dict[str, Any], source: str) -> str:
    archs = cfg.get("architectures") or []
    if not archs and cfg.get("model_type") in _MODEL_TYPES:
        archs = [_MODEL_TYPES[cfg["model_type"]]]
    for arch in archs:
        if arch in SUPPORTED_ARCHITECTURES:
            return arch
    found = ", ".join(archs) or f"model_type={cfg.get('model_type')!r}"
    raise BringupError(
        f"{source}: architecture {found} is not supported; supported: {', '.join(SUPPORTED_ARCHITECTURES)}"
    )


def _rope(cfg: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """Read rope theta and scaling from either `rope_parameters` (transformers>=5) or `rope_scaling`."""
    params = dict(cfg.get("rope_parameters") or {})
    scaling = dict(cfg.get("rope_scaling") or {}) or params
    theta = float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type in (None, "default"):
        return theta, None
    if rope_type != "llama3":
        raise BringupError(f"config.json: rope scaling type {rope_type!r} is not supported (only 'llama3')")
    return theta, {**scaling, "rope_type": "llama3"}
