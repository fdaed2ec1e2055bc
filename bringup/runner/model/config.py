"""Model configuration: the subset of a Hugging Face `config.json` a Llama-family decoder needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bringup.errors import BringupError
from bringup.profiles.store import printable
from bringup.runner.model.config_fields import MAX_LAYERS, MAX_POSITIONS, Fields, json_type
from bringup.runner.model.moe_config import MIXTRAL, QWEN3_MOE, MoESettings, parse_moe

QWEN3, PHI3, GEMMA2 = "Qwen3ForCausalLM", "Phi3ForCausalLM", "Gemma2ForCausalLM"
SUPPORTED_ARCHITECTURES = ("LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", QWEN3, PHI3, GEMMA2,
                           MIXTRAL, QWEN3_MOE)
_MODEL_TYPES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
                "qwen3": QWEN3, "phi3": PHI3, "gemma2": GEMMA2, "mixtral": MIXTRAL, "qwen3_moe": QWEN3_MOE}
# the MLP activation's config key and the one value each family serves (the others: hidden_act, silu)
_ACTIVATION = {GEMMA2: ("hidden_activation", "gelu_pytorch_tanh")}
_HEAD_DIM_DEFAULT = {QWEN3: 128, GEMMA2: 256}  # transformers' default when config.json has no head_dim


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
    hidden_act: str = "silu"  # the MLP gate's activation: silu (SwiGLU) or gelu_pytorch_tanh (GeGLU)
    sliding_layers: list[bool] = field(default_factory=list)  # per layer: attends only within sliding_window
    attention_scale: float | None = None  # None: head_dim ** -0.5
    attn_logit_softcap: float | None = None  # scores -> cap * tanh(scores / cap) before the softmax
    final_logit_softcap: float | None = None  # logits -> cap * tanh(logits / cap)
    partial_rotary_factor: float = 1.0  # the share of each head's dims that rope rotates
    moe: MoESettings | None = None  # the sparse layers' experts (moe_config.py); None: a dense model

    @property
    def num_queries_per_kv(self) -> int:
        return self.num_heads // self.num_kv_heads

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    def layer_window(self, index: int) -> int | None:
        """The sliding window of layer `index` (a query at p attends to keys in (p - window, p]), or None."""
        return self.sliding_window if self.sliding_layers and self.sliding_layers[index] else None

    @property
    def attention_window(self) -> int | None:
        """The window the model's sliding layers share (None: no layer slides)."""
        return self.sliding_window if any(self.sliding_layers) else None

    @classmethod
    def from_hf(cls, cfg: Any, source: str = "config.json") -> ModelConfig:
        """Parse a Hugging Face config dict; BringupError (one line naming the field) for wrong types, sizes
        that cannot describe a model, and architectures this runner cannot run."""
        if not isinstance(cfg, dict):
            raise BringupError(f"{source} must be a JSON object of model settings, got a JSON "
                               f"{json_type(cfg)}; re-download or fix the file")
        fields = Fields(cfg, source)
        arch = _architecture(fields)
        act_key, act_served = _ACTIVATION.get(arch, ("hidden_act", "silu"))
        act = fields.text(act_key, act_served)
        if act != act_served:
            raise BringupError(f"{source}: {act_key} {printable(act)[:40]!r} is not supported "
                               f"(only {act_served!r} for {arch})")
        hidden, heads = fields.size("hidden_size"), fields.size("num_attention_heads")
        kv_heads = fields.size("num_key_value_heads", heads)
        head_dim = fields.size("head_dim", _HEAD_DIM_DEFAULT.get(arch))
        _check_heads(source, hidden, heads, kv_heads, head_dim)
        rope_theta, scaling = _rope(fields)
        window = fields.size("sliding_window", None, limit=MAX_POSITIONS)
        if arch == "Qwen2ForCausalLM" and not fields.flag("use_sliding_window", False):
            window = None
        config = cls(
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
            hidden_act=act,
        )
        family_fields = _FAMILY_FIELDS.get(arch)
        if family_fields is not None:
            family_fields(fields, config)
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
    if not archs and model_type in _MODEL_TYPES:
        archs = [_MODEL_TYPES[model_type]]
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
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type in (None, "default"):
        return theta, None
    if rope_type != "llama3":
        raise BringupError(f"{fields.source}: rope scaling type {str(rope_type)[:40]!r} is not supported "
                           "(only 'llama3')")
    where = Fields(scaling, f"{fields.source}: rope scaling")
    where.positive_number("factor")
    low, high = where.positive_number("low_freq_factor", 1.0), where.positive_number("high_freq_factor", 4.0)
    where.positive_number("original_max_position_embeddings", 8192.0)
    if low == high:
        raise BringupError(f"{fields.source}: rope scaling has high_freq_factor equal to low_freq_factor, which "
                           "divides by zero; fix the file")
    return theta, {**scaling, "rope_type": "llama3"}


# ---------------------------------------------------------------- what only some families read


def _null(fields: Fields, key: str) -> bool:
    """config.json sets `key` to null explicitly (which turns a feature off, unlike an absent key)."""
    return key in fields.cfg and fields.cfg[key] is None


def _sliding_layers(fields: Fields, layers: int, window: int | None, rule: Callable[[int], bool]) -> list[bool]:
    """Which layers slide: config.json's layer_types when given, else the family's rule; none without a window."""
    if window is None:
        return []
    if not fields.has("layer_types"):
        return [rule(i) for i in range(layers)]
    types = fields.get("layer_types", None)
    kinds = ("full_attention", "sliding_attention")
    if not isinstance(types, list) or len(types) != layers or not all(isinstance(t, str) and t in kinds
                                                                     for t in types):
        raise fields.wrong("layer_types", f"a list of {layers} entries, each 'full_attention' or 'sliding_attention'")
    return [t == "sliding_attention" for t in types]


def _qwen3_fields(fields: Fields, c: ModelConfig) -> None:
    """Qwen2 and Qwen3: sliding layers only with use_sliding_window, from max_window_layers on (or as layer_types
    says)."""
    slides = fields.flag("use_sliding_window", False)
    c.sliding_window = fields.size("sliding_window", 4096, limit=MAX_POSITIONS) if slides else None
    first = fields.count("max_window_layers", 28)
    c.sliding_layers = _sliding_layers(fields, c.num_layers, c.sliding_window, lambda i: i >= first)


def _every_layer_slides(fields: Fields, c: ModelConfig) -> None:
    """Mistral: every layer attends within sliding_window when it is set."""
    c.sliding_layers = [True] * c.num_layers if c.sliding_window else []


def _phi3_fields(fields: Fields, c: ModelConfig) -> None:
    """Every layer slides when sliding_window is set; rope may rotate only part of each head."""
    c.rms_norm_eps = fields.positive_number("rms_norm_eps", 1e-5)
    _every_layer_slides(fields, c)
    if c.rope_scaling is not None:
        raise BringupError(f"{fields.source}: rope scaling {c.rope_scaling.get('rope_type')!r} is not one Phi-3 "
                           "uses; only plain rope is supported for Phi3ForCausalLM")
    params = fields.mapping("rope_parameters")
    where = Fields(params, f"{fields.source}: rope_parameters") if "partial_rotary_factor" in params else fields
    factor = where.positive_number("partial_rotary_factor", 1.0)
    rotary = int(c.head_dim * factor)
    if factor > 1 or rotary < 2 or rotary % 2:
        raise BringupError(f"{fields.source}: partial_rotary_factor {factor} rotates {rotary} of head_dim "
                           f"{c.head_dim}; it must rotate an even number of dimensions, at least 2 and at most "
                           "head_dim; fix the file")
    c.partial_rotary_factor = factor


def _gemma2_fields(fields: Fields, c: ModelConfig) -> None:
    """Alternating sliding layers (even indices slide), attention scale from query_pre_attn_scalar, soft-caps."""
    if fields.flag("use_bidirectional_attention", False):
        raise BringupError(f"{fields.source}: use_bidirectional_attention true is not supported (the runner decodes "
                           "causally); set it to false or null")
    c.tie_word_embeddings = fields.flag("tie_word_embeddings", True)
    c.sliding_window = None if _null(fields, "sliding_window") else \
        fields.size("sliding_window", 4096, limit=MAX_POSITIONS)
    c.sliding_layers = _sliding_layers(fields, c.num_layers, c.sliding_window, lambda i: i % 2 == 0)
    c.attention_scale = fields.positive_number("query_pre_attn_scalar", 256.0) ** -0.5
    c.attn_logit_softcap = fields.optional_number("attn_logit_softcapping", 50.0)
    c.final_logit_softcap = fields.optional_number("final_logit_softcapping", 30.0)


def _moe_fields(fields: Fields, c: ModelConfig) -> None:
    """Experts (moe_config.py); like Mistral and Qwen2, every layer slides when a window is set (Qwen3-MoE: only with
    use_sliding_window)."""
    if c.architecture == QWEN3_MOE and not fields.flag("use_sliding_window", False):
        c.sliding_window = None
    c.sliding_layers = [True] * c.num_layers if c.sliding_window else []
    c.moe = parse_moe(fields, c.architecture, c.num_layers, c.intermediate_size)


_FAMILY_FIELDS: dict[str, Callable[[Fields, ModelConfig], None]] = {
    QWEN3: _qwen3_fields, PHI3: _phi3_fields, GEMMA2: _gemma2_fields, "MistralForCausalLM": _every_layer_slides,
    "Qwen2ForCausalLM": _qwen3_fields, MIXTRAL: _moe_fields, QWEN3_MOE: _moe_fields}


def mlp_weight_elements(config: ModelConfig) -> int:
    """Elements of every layer's MLP projections: the dense layers' gate, up and down, each sparse layer's experts
    (the router is not a linear layer the weight layout stores twice)."""
    moe, hidden = config.moe, config.hidden_size
    sparse = len(moe.sparse_layers) if moe else 0
    experts = sparse * moe.num_experts * 3 * moe.expert_intermediate_size * hidden if moe else 0
    return (config.num_layers - sparse) * 3 * config.intermediate_size * hidden + experts
