"""Phi-3: Llama's math, with q/k/v stored fused as `self_attn.qkv_proj` and gate/up as `mlp.gate_up_proj` in the
checkpoint (loaded as they are), no biases, every layer sliding when `sliding_window` is set, and rope over the
first `partial_rotary_factor` of each head. Long-context rope (longrope/su) is refused.
"""

from __future__ import annotations

from typing import ClassVar

from bringup.errors import BringupError
from bringup.runner.model.checkpoint import CheckpointNames
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import Fields
from bringup.runner.model.decoder import DecoderModel, ProjectionBiases

PHI3 = "Phi3ForCausalLM"


class Phi3Decoder(DecoderModel):
    architectures = (PHI3,)
    model_types: ClassVar[dict[str, str]] = {"phi3": PHI3}
    checkpoint_names: ClassVar[CheckpointNames] = CheckpointNames(fused=True)

    @classmethod
    def read_config(cls, fields: Fields, c: ModelConfig) -> None:
        """Every layer slides when sliding_window is set; rope may rotate only part of each head."""
        c.rms_norm_eps = fields.positive_number("rms_norm_eps", 1e-5)
        c.slide_every_layer()
        if c.rope_scaling is not None:
            raise BringupError(f"{fields.source}: rope scaling {c.rope_scaling.get('rope_type')!r} is not one Phi-3 "
                               "uses; only plain rope is supported for Phi3ForCausalLM")
        params = fields.mapping("rope_parameters")
        where = Fields(params, f"{fields.source}: rope_parameters") if "partial_rotary_factor" in params else fields
        factor = where.positive_number("partial_rotary_factor", 1.0)
        rotary = int(c.head_dim * factor)
        if factor > 1 or rotary < 2 or rotary % 2:
            raise BringupError(f"{fields.source}: partial_rotary_factor {factor} rotates {rotary} of head_dim "
                               f"{c.head_dim}; it must rotate an even number of dimensions, at least 2 and at most "
                               "head_dim; fix the file")
        c.partial_rotary_factor = factor

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        return ProjectionBiases()
