"""Qwen3: Llama's tensors and math plus an RMSNorm over head_dim on every head of q and k (q_norm, k_norm),
applied before rope. head_dim is explicit (not hidden / heads); `attention_bias` adds biases to q, k, v and o;
with `use_sliding_window` the layers from `max_window_layers` on (or as `layer_types` says) attend within
`sliding_window` (as in Qwen2).
"""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.checkpoint import CheckpointNames
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import Fields
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases
from bringup.runner.model.families.qwen2 import read_qwen_window

QWEN3 = "Qwen3ForCausalLM"


class Qwen3Decoder(DecoderModel):
    architectures = (QWEN3,)
    model_types: ClassVar[dict[str, str]] = {"qwen3": QWEN3}
    head_dim_default: ClassVar[int | None] = 128
    checkpoint_names: ClassVar[CheckpointNames] = CheckpointNames(qk_norms=True)

    @classmethod
    def read_config(cls, fields: Fields, config: ModelConfig) -> None:
        read_qwen_window(fields, config)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=False)
