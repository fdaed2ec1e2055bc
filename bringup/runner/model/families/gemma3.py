"""Gemma 3 (text): Gemma-2's layer (four norms scaling by 1 + weight, GeGLU with tanh GELU, embeddings scaled by
sqrt(hidden) rounded to the model dtype, attention scaled by query_pre_attn_scalar ** -0.5, tied embeddings by
default) plus q/k norms over head_dim (1 + weight, before rope), and local and global layers interleaved: every
`sliding_window_pattern`-th layer (6) is global, the others slide within `sliding_window` (or as `layer_types`
says). Global layers rotate by `rope_theta` (1e6) with the config's scaling (4B and up: linear, factor 8), local
ones by `rope_local_base_freq` (1e4) unscaled. No soft-capping of attention logits; final logits only when
`final_logit_softcapping` is set (transformers' Gemma 3 never passes `attn_logit_softcapping` to its attention).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from bringup.errors import BringupError
from bringup.runner.model.attention_layer import AttentionSpec
from bringup.runner.model.checkpoint import CheckpointNames
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import MAX_LAYERS, Fields, sliding_kind_layers
from bringup.runner.model.config.rope_settings import read_rope_scaling
from bringup.runner.model.families.gemma2 import Gemma2Decoder, read_shared

GEMMA3 = "Gemma3ForCausalLM"
GLOBAL_ROPE_THETA, LOCAL_ROPE_THETA, SLIDING_PATTERN = 1_000_000.0, 10_000.0, 6  # transformers' defaults


class Gemma3Decoder(Gemma2Decoder):
    architectures = (GEMMA3,)
    model_types: ClassVar[dict[str, str]] = {"gemma3_text": GEMMA3}
    checkpoint_names: ClassVar[CheckpointNames] = CheckpointNames(qk_norms=True)

    @classmethod
    def read_config(cls, fields: Fields, c: ModelConfig) -> None:
        """Local and global layers, their two ropes, the attention scale, the final soft-cap when set."""
        read_shared(fields, c)
        pattern = fields.size("sliding_window_pattern", SLIDING_PATTERN, limit=MAX_LAYERS)
        local = sliding_kind_layers(fields, c.num_layers, lambda i: (i + 1) % pattern != 0)
        c.sliding_layers = local if c.sliding_window is not None else []
        c.local_rope_layers = local  # the rope follows the layer's kind even without a window, as in transformers
        c.rope_theta, c.rope_scaling, c.local_rope_theta = _ropes(fields)
        c.attention_scale = fields.positive_number("query_pre_attn_scalar", 256.0) ** -0.5
        fields.optional_number("attn_logit_softcapping", None)  # checked, but never applied (as in transformers)
        c.attn_logit_softcap = None
        c.final_logit_softcap = fields.optional_number("final_logit_softcapping", None)

    @classmethod
    def attention_spec(cls, config: ModelConfig, layer_index: int) -> AttentionSpec:
        return replace(super().attention_spec(config, layer_index), qk_norm_offset=1.0)


def _ropes(fields: Fields) -> tuple[float, dict[str, Any] | None, float]:
    """(global base, global scaling, local base): transformers 5 writes `rope_parameters` per layer kind
    (`full_attention`, `sliding_attention`); older files have rope_theta, rope_scaling and rope_local_base_freq."""
    params = fields.mapping("rope_parameters")
    if "full_attention" not in params and "sliding_attention" not in params:
        return (fields.positive_number("rope_theta", GLOBAL_ROPE_THETA),
                read_rope_scaling(fields.mapping("rope_scaling"), fields.source),
                fields.positive_number("rope_local_base_freq", LOCAL_ROPE_THETA))
    kinds = Fields(params, f"{fields.source}: rope_parameters")
    full, local = (Fields(kinds.mapping(kind), f"{kinds.source}.{kind}") for kind in ("full_attention",
                                                                                     "sliding_attention"))
    if read_rope_scaling(local.cfg, local.source) is not None:
        raise BringupError(f"{local.source}: rope scaling on the sliding layers is not supported (Gemma 3 scales only "
                           "the global layers' rope); remove it or fix the file")
    return (full.positive_number("rope_theta", GLOBAL_ROPE_THETA), read_rope_scaling(full.cfg, full.source),
            local.positive_number("rope_theta", LOCAL_ROPE_THETA))
