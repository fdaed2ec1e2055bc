"""Qwen2: Llama's tensors and math, with biases on q, k and v (always) and never on o."""

from __future__ import annotations

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases


class Qwen2Decoder(DecoderModel):
    architectures = ("Qwen2ForCausalLM",)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=True, o=False, mlp=config.mlp_bias)
