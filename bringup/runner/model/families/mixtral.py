"""Mixtral: Mistral's attention; every layer's MLP is a sparse block (`block_sparse_moe`) of
`num_local_experts` SwiGLU experts (w1 gate, w3 up, w2 down, each of `intermediate_size`), top-k routing
weights always renormalised to sum to one and kept in float32 when they scale the experts' outputs.
moe.py runs the block.
"""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import Fields
from bringup.runner.model.config.moe_settings import MAX_EXPERTS, ExpertNames, MoESettings, read_top_k
from bringup.runner.model.decoder import ProjectionBiases
from bringup.runner.model.moe import SparseLayers

MIXTRAL = "MixtralForCausalLM"
EXPERT_NAMES = ExpertNames(block="block_sparse_moe", gate="w1", up="w3", down="w2")


class MixtralDecoder(SparseLayers):
    architectures = (MIXTRAL,)
    model_types: ClassVar[dict[str, str]] = {"mixtral": MIXTRAL}

    @classmethod
    def read_config(cls, fields: Fields, c: ModelConfig) -> None:
        """Like Mistral, every layer slides when a window is set; every layer is sparse."""
        c.slide_every_layer()
        experts = fields.size("num_local_experts", 8, limit=MAX_EXPERTS)
        c.moe = MoESettings(num_experts=experts, top_k=read_top_k(fields, experts, 2),
                            expert_intermediate_size=c.intermediate_size, renormalize=True,
                            sparse_layers=tuple(range(c.num_layers)), names=EXPERT_NAMES, weights_in_model_dtype=False)

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases(qkv=config.qkv_bias, o=config.o_bias, mlp=False)
