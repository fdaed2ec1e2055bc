"""Qwen3-MoE: Qwen3's attention (per-head q/k RMSNorm, qwen3.py); layer i is sparse unless it is in
`mlp_only_layers` or (i + 1) is not a multiple of `decoder_sparse_step`. A sparse layer's `mlp` holds a router
(`gate`) and `num_experts` SwiGLU experts of `moe_intermediate_size`; the top-k routing weights are renormalised
only with `norm_topk_prob` and cast to the model dtype before they scale the experts' outputs. Dense layers
have Qwen3's MLP of `intermediate_size`; every layer slides when `use_sliding_window` and a window are set. moe.py
runs the block.
"""

from __future__ import annotations

from typing import ClassVar

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import Fields
from bringup.runner.model.config.moe_settings import MAX_EXPERTS, ExpertNames, MoESettings, read_layer_list, read_top_k
from bringup.runner.model.families.qwen3 import Qwen3Decoder
from bringup.runner.model.moe import SparseLayers

QWEN3_MOE = "Qwen3MoeForCausalLM"
EXPERT_NAMES = ExpertNames(block="mlp", gate="gate_proj", up="up_proj", down="down_proj")


class Qwen3MoeDecoder(SparseLayers, Qwen3Decoder):
    architectures = (QWEN3_MOE,)
    model_types: ClassVar[dict[str, str]] = {"qwen3_moe": QWEN3_MOE}
    head_dim_default: ClassVar[int | None] = None  # unlike Qwen3, head_dim defaults to hidden / heads

    @classmethod
    def read_config(cls, fields: Fields, c: ModelConfig) -> None:
        if not fields.flag("use_sliding_window", False):
            c.sliding_window = None
        c.slide_every_layer()
        key = "num_experts" if fields.has("num_experts") else "num_local_experts"  # transformers 5 saves the alias
        experts = fields.size(key, 128, limit=MAX_EXPERTS)
        step = fields.size("decoder_sparse_step", 1)
        dense_only = read_layer_list(fields, "mlp_only_layers", c.num_layers)
        sparse = tuple(i for i in range(c.num_layers) if i not in dense_only and (i + 1) % step == 0)
        c.moe = MoESettings(num_experts=experts, top_k=read_top_k(fields, experts, 8),
                            expert_intermediate_size=fields.size("moe_intermediate_size", 768),
                            renormalize=fields.flag("norm_topk_prob", False), sparse_layers=sparse,
                            names=EXPERT_NAMES, weights_in_model_dtype=True)
