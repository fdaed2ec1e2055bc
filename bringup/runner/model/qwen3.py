"""Qwen3: Llama's tensors and math plus an RMSNorm over head_dim on every head of q and k (q_norm, k_norm),
applied before rope. head_dim is explicit (not hidden / heads); `attention_bias` adds biases to q, k, v and o;
with `use_sliding_window` the layers from `max_window_layers` on (or as `layer_types` says) attend within
`sliding_window` (config.py reads which).
"""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.checkpoint import CheckpointNames
from bringup.runner.model.config import QWEN3, ModelConfig
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases


class Qwen3Decoder(DecoderModel):
    architectures = (QWEN3,)
    checkpoint_names: ClassVar[CheckpointNames] = CheckpointNames(qk_norms=True)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=False)
