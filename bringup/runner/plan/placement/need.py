"""What a model needs from the devices that hold it, as element counts (each device holds them in its own dtype)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.families import hf_tensor_shapes

LAYER_PREFIX = "model.layers."


@dataclass(frozen=True)
class ModelNeed:
    layers: int
    layer_elements: tuple[int, ...]  # each decoder layer's weights
    other_elements: int  # embeddings, final norm and output head: with the first and the last layer
    kv_elements_per_token: int  # K and V of one token in one layer
    context_tokens: int  # the KV cache must hold at least one sequence of this many tokens
    hidden_size: int  # one token's activations crossing between devices

    @property
    def weight_elements(self) -> int:
        return sum(self.layer_elements) + self.other_elements


def model_need(config: ModelConfig, context_tokens: int) -> ModelNeed:
    per_layer = [0] * config.num_layers
    other = 0
    for name, shape in hf_tensor_shapes(config).items():
        if shape is None:
            continue
        count = math.prod(shape)
        if name.startswith(LAYER_PREFIX):
            per_layer[int(name[len(LAYER_PREFIX):].split(".", 1)[0])] += count
        else:
            other += count
    return ModelNeed(config.num_layers, tuple(per_layer), other, 2 * config.num_kv_heads * config.head_dim,
                     context_tokens, config.hidden_size)
