"""The mixture-of-experts settings of a config.json, parsed strictly (mixtral.py and qwen3_moe.py read theirs).

ModelConfig holds them as one optional field, `moe` (None for a dense model). Each error is one line naming the
file and the field. `router_aux_loss_coef`, `output_router_logits` and `router_jitter_noise` only matter for
training and are not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.errors import BringupError
from bringup.runner.model.config.fields import Fields
from bringup.runner.sampling_params import is_integer

MAX_EXPERTS = 2**14


@dataclass(frozen=True)
class ExpertNames:
    """Where a family's checkpoint keeps one sparse block, under `model.layers.<i>.<block>.`: the router is
    `<router>.weight`, expert e's projections `experts.<e>.<gate|up|down>.weight`."""

    block: str
    gate: str
    up: str
    down: str
    router: str = "gate"


@dataclass(frozen=True)
class MoESettings:
    """How the sparse layers route tokens to experts."""

    num_experts: int
    top_k: int  # experts per token
    expert_intermediate_size: int
    renormalize: bool  # the top-k routing weights divided by their sum (Mixtral always, Qwen3-MoE norm_topk_prob)
    sparse_layers: tuple[int, ...]  # the others have the dense MLP of `intermediate_size`
    names: ExpertNames
    weights_in_model_dtype: bool  # Qwen3-MoE casts the float32 routing weights to the model dtype before use

    def is_sparse(self, layer_index: int) -> bool:
        return layer_index in self.sparse_layers

    def expert_tensor_shapes(self, layer_prefix: str, hidden: int) -> dict[str, tuple[int, ...]]:
        """The router's and every expert's tensors of one sparse layer, by Hugging Face name."""
        block, n, inter = f"{layer_prefix}{self.names.block}.", self.names, self.expert_intermediate_size
        shapes: dict[str, tuple[int, ...]] = {f"{block}{n.router}.weight": (self.num_experts, hidden)}
        for e in range(self.num_experts):
            expert = f"{block}experts.{e}."
            shapes |= {f"{expert}{n.gate}.weight": (inter, hidden), f"{expert}{n.up}.weight": (inter, hidden),
                       f"{expert}{n.down}.weight": (hidden, inter)}
        return shapes


def read_top_k(fields: Fields, experts: int, default: int) -> int:
    top_k = fields.size("num_experts_per_tok", default, limit=MAX_EXPERTS)
    if top_k > experts:
        raise BringupError(f"{fields.source}: num_experts_per_tok {top_k} is more than the {experts} experts; "
                           "each token picks at most every expert: fix the file")
    return top_k


def read_layer_list(fields: Fields, key: str, num_layers: int) -> frozenset[int]:
    """A list of layer indices, each below num_hidden_layers (absent or null: none)."""
    value = fields.get(key, [])
    if not isinstance(value, list) or not all(is_integer(i) and 0 <= i < num_layers for i in value):
        raise fields.wrong(key, f"a list of layer indices from 0 to {num_layers - 1}")
    return frozenset(value)
