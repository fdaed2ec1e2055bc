"""Gemma-2: embeddings scaled by sqrt(hidden) (rounded to the model dtype), RMSNorm scaling by (1 + weight), four
norms per layer (the attention and MLP outputs are normalised too before the residual add), GeGLU (gelu tanh),
attention scaled by query_pre_attn_scalar ** -0.5 with logit soft-capping, even layers sliding, the final logits
soft-capped, tied embeddings (by default: config.json may say otherwise).
"""

from __future__ import annotations

from typing import ClassVar

import torch

from bringup.errors import BringupError
from bringup.runner.model.attention_layer import AttentionMetadata
from bringup.runner.model.checkpoint import SANDWICH_NORMS
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import MAX_POSITIONS, Fields, sliding_layers
from bringup.runner.model.decoder import DecoderLayer, DecoderModel, ProjectionBiases
from bringup.runner.model.norm import OffsetRMSNorm, RMSNorm

GEMMA2 = "Gemma2ForCausalLM"


class Gemma2Layer(DecoderLayer):
    """x + post_attn_norm(attn(input_norm(x))), then x + post_ff_norm(mlp(pre_ff_norm(x)))."""

    norm_names: ClassVar[tuple[str, ...]] = SANDWICH_NORMS

    def forward(self, x: torch.Tensor, kind: str, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), kind, cos, sin, meta))
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x), kind))


class Gemma2Decoder(DecoderModel):
    architectures = (GEMMA2,)
    model_types: ClassVar[dict[str, str]] = {"gemma2": GEMMA2}
    activation: ClassVar[tuple[str, str]] = ("hidden_activation", "gelu_pytorch_tanh")
    head_dim_default: ClassVar[int | None] = 256
    layer_class = Gemma2Layer
    scales_embeddings = True

    @classmethod
    def read_config(cls, fields: Fields, c: ModelConfig) -> None:
        """Alternating sliding layers (even indices slide), attention scale from query_pre_attn_scalar, soft-caps."""
        read_shared(fields, c)
        c.sliding_layers = sliding_layers(fields, c.num_layers, c.sliding_window, lambda i: i % 2 == 0)
        c.attention_scale = fields.positive_number("query_pre_attn_scalar", 256.0) ** -0.5
        c.attn_logit_softcap = fields.optional_number("attn_logit_softcapping", 50.0)
        c.final_logit_softcap = fields.optional_number("final_logit_softcapping", 30.0)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=False)

    @classmethod
    def make_norm(cls, config: ModelConfig) -> RMSNorm:
        return OffsetRMSNorm(config.hidden_size, config.rms_norm_eps, offset=1.0)


def refuse_bidirectional(fields: Fields) -> None:
    """Gemma's `use_bidirectional_attention` (an encoder's attention) refused: the runner decodes causally."""
    if fields.flag("use_bidirectional_attention", False):
        raise BringupError(f"{fields.source}: use_bidirectional_attention true is not supported (the runner "
                           "decodes causally); set it to false or null")


def read_shared(fields: Fields, c: ModelConfig) -> None:
    """What Gemma 2 and Gemma 3 read alike: causal attention only, the tied head, the sliding window (null: none)."""
    refuse_bidirectional(fields)
    c.tie_word_embeddings = fields.flag("tie_word_embeddings", True)
    c.sliding_window = None if fields.is_null("sliding_window") else \
        fields.size("sliding_window", 4096, limit=MAX_POSITIONS)
