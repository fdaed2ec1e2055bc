"""Phi-3: Llama's math, with q/k/v stored fused as `self_attn.qkv_proj` and gate/up as `mlp.gate_up_proj` in the
checkpoint (loaded as they are), no biases, every layer sliding when `sliding_window` is set, and rope over the
first `partial_rotary_factor` of each head. Long-context rope (longrope/su) is refused by config.py.
"""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.checkpoint import CheckpointNames
from bringup.runner.model.config import PHI3, ModelConfig
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases


class Phi3Decoder(DecoderModel):
    architectures = (PHI3,)
    checkpoint_names: ClassVar[CheckpointNames] = CheckpointNames(fused=True)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases()
