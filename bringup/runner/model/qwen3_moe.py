"""Qwen3-MoE: Qwen3's attention (per-head q/k RMSNorm, qwen3.py); layer i is sparse unless it is in
`mlp_only_layers` or (i + 1) is not a multiple of `decoder_sparse_step`. A sparse layer's `mlp` holds a router
(`gate`) and `num_experts` SwiGLU experts of `moe_intermediate_size`; the top-k routing weights are renormalised
only with `norm_topk_prob` and cast to the model dtype before they scale the experts' outputs. Dense layers
have Qwen3's MLP of `intermediate_size`. config.py reads the settings (moe_config.py); moe.py runs the block.
"""

from __future__ import annotations

from bringup.runner.model.moe import SparseLayers
from bringup.runner.model.moe_config import QWEN3_MOE
from bringup.runner.model.qwen3 import Qwen3Decoder


class Qwen3MoeDecoder(SparseLayers, Qwen3Decoder):
    architectures = (QWEN3_MOE,)
