"""Mixtral: Mistral's attention; every layer's MLP is a sparse block (`block_sparse_moe`) of
`num_local_experts` SwiGLU experts (w1 gate, w3 up, w2 down, each of `intermediate_size`), top-k routing
weights always renormalised to sum to one and kept in float32 when they scale the experts' outputs.
config.py reads the settings (moe_config.py); moe.py runs the block.
"""

from __future__ import annotations

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import ProjectionBiases
from bringup.runner.model.moe import SparseLayers
from bringup.runner.model.moe_config import MIXTRAL


class MixtralDecoder(SparseLayers):
    architectures = (MIXTRAL,)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=False)
