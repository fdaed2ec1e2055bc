"""Model configuration: the subset of a Hugging Face `config.json` a Llama-family decoder needs (plain data, no
torch; hf_config.py reads it from a config.json)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bringup.runner.model.config.moe_settings import MoESettings
from bringup.runner.weights.formats.compressed_tensors.scheme import StoredQuantization


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
    local_rope_layers: list[bool] = field(default_factory=list)  # per layer: rotates by local_rope_theta instead
    local_rope_theta: float = 10000.0  # those layers' rope base, never scaled (Gemma 3's sliding layers)
    moe: MoESettings | None = None  # the sparse layers' experts (config/moe_settings.py); None: a dense model
    stored_quantization: StoredQuantization | None = None  # a pre-quantized checkpoint's own (compressed-tensors)

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

    def slide_every_layer(self) -> None:
        """Every layer attends within sliding_window when it is set (Mistral, Phi-3, the MoE families)."""
        self.sliding_layers = [True] * self.num_layers if self.sliding_window else []


def mlp_weight_elements(config: ModelConfig) -> int:
    """Elements of every layer's MLP projections: the dense layers' gate, up and down, each sparse layer's experts
    (the router is not a linear layer the weight layout stores twice)."""
    moe, hidden = config.moe, config.hidden_size
    sparse = len(moe.sparse_layers) if moe else 0
    experts = sparse * moe.num_experts * 3 * moe.expert_intermediate_size * hidden if moe else 0
    return (config.num_layers - sparse) * 3 * config.intermediate_size * hidden + experts
