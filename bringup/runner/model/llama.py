"""Llama (2 and 3, with Llama 3 rope scaling) and Mistral: the same tensors and the same math.

`attention_bias` in config.json (config.py's qkv_bias and o_bias) adds biases to q, k, v and o;
`mlp_bias` to gate, up and down. Mistral's sliding window applies to every layer (config.py), through the
attention mask of the step (batch_inputs.py).
"""

from __future__ import annotations

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases


class LlamaDecoder(DecoderModel):
    architectures = ("LlamaForCausalLM", "MistralForCausalLM")

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=config.mlp_bias)
