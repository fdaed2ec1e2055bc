"""Gemma-2: embeddings scaled by sqrt(hidden) (rounded to the model dtype), RMSNorm scaling by (1 + weight), four
norms per layer (the attention and MLP outputs are normalised too before the residual add), GeGLU (gelu tanh),
attention scaled by query_pre_attn_scalar ** -0.5 with logit soft-capping, even layers sliding, the final logits
soft-capped, tied embeddings. The numbers are config.py's; this file says where they go.
"""

from __future__ import annotations

from typing import ClassVar

import torch

from bringup.runner.model.attention_layer import AttentionMetadata
from bringup.runner.model.checkpoint import SANDWICH_NORMS
from bringup.runner.model.config import GEMMA2, ModelConfig
from bringup.runner.model.decoder import DecoderLayer, DecoderModel, ProjectionBiases
from bringup.runner.model.norm import OffsetRMSNorm, RMSNorm


class Gemma2Layer(DecoderLayer):
    """x + post_attn_norm(attn(input_norm(x))), then x + post_ff_norm(mlp(pre_ff_norm(x)))."""

    norm_names: ClassVar[tuple[str, ...]] = SANDWICH_NORMS

    def forward(self, x: torch.Tensor, kind: str, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        x = x + self.post_attention_layernorm(self.self_attn(self.input_layernorm(x), kind, cos, sin, meta))
        return x + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(x), kind))


class Gemma2Decoder(DecoderModel):
    architectures = (GEMMA2,)
    layer_class = Gemma2Layer
    scales_embeddings = True

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=False)

    @classmethod
    def make_norm(cls, config: ModelConfig) -> RMSNorm:
        return OffsetRMSNorm(config.hidden_size, config.rms_norm_eps, offset=1.0)
