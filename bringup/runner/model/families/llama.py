"""Llama (2 and 3, with Llama 3 rope scaling) and Mistral: the same tensors and the same math.

`attention_bias` in config.json (config.py's qkv_bias and o_bias) adds biases to q, k, v and o;
`mlp_bias` to gate, up and down. Mistral's sliding window applies to every layer, through the attention mask of
the step (batch_inputs.py); Llama's, when a config.json gives one, is not implemented (the plan caps the context).
"""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import Fields
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases

LLAMA, MISTRAL = "LlamaForCausalLM", "MistralForCausalLM"


class LlamaDecoder(DecoderModel):
    architectures = (LLAMA, MISTRAL)
    model_types: ClassVar[dict[str, str]] = {"llama": LLAMA, "mistral": MISTRAL}

    @classmethod
    def read_config(cls, fields: Fields, config: ModelConfig) -> None:
        if config.architecture == MISTRAL:
            config.slide_every_layer()

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=config.mlp_bias)
