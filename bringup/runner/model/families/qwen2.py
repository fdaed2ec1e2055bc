"""Qwen2: Llama's tensors and math, with biases on q, k and v (always) and never on o; with `use_sliding_window`
the layers from `max_window_layers` on (or as `layer_types` says) attend within `sliding_window` (as in Qwen3)."""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import MAX_POSITIONS, Fields, sliding_layers
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases

QWEN2 = "Qwen2ForCausalLM"


def read_qwen_window(fields: Fields, c: ModelConfig) -> None:
    """Qwen2 and Qwen3: sliding layers only with use_sliding_window, from max_window_layers on (or as layer_types
    says)."""
    slides = fields.flag("use_sliding_window", False)
    c.sliding_window = fields.size("sliding_window", 4096, limit=MAX_POSITIONS) if slides else None
    first = fields.count("max_window_layers", 28)
    c.sliding_layers = sliding_layers(fields, c.num_layers, c.sliding_window, lambda i: i >= first)


class Qwen2Decoder(DecoderModel):
    architectures = (QWEN2,)
    model_types: ClassVar[dict[str, str]] = {"qwen2": QWEN2}

    @classmethod
    def read_config(cls, fields: Fields, config: ModelConfig) -> None:
        read_qwen_window(fields, config)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=True, o=False, mlp=config.mlp_bias)
