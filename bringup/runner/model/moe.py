"""A sparse mixture-of-experts block (Mixtral, Qwen3-MoE): a router picks each token's top-k experts, each a
SwiGLU MLP, and their outputs are summed with the routing weights.

Two ways to run the experts, chosen by the execution plan (plan.py, row `experts`):
- "dense": every expert on every token, each output weighted by its routing weight (zero when not chosen):
  matmuls, multiplies and adds with static shapes; computes num_experts / top_k times the work.
- "grouped": the (token, expert) pairs sorted by expert (stable), each expert's contiguous group through its MLP,
  the weighted rows summed back per token with index_add_; computes only the chosen experts.

The router runs as transformers does (logits in the model dtype, softmax in float32, torch.topk of the
probabilities), so equal probabilities resolve to the same experts.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from bringup.runner.model.checkpoint import MLP_PROJECTIONS
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import MLP, DecoderModel
from bringup.runner.weights.checkpoint_reader import CheckpointReader

DENSE, GROUPED = "dense", "grouped"
EXPERT_PATHS = (DENSE, GROUPED)
MLP_PREFIX = "mlp."  # what DecoderLayer appends to the layer prefix for its MLP


class GroupedPathError(RuntimeError):
    """The grouped expert path failed on this device (the executor falls back to the dense path)."""


def route(x: torch.Tensor, router: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(weights [T, k] float32, experts [T, k] int64) of the tokens x [T, hidden]."""
    probs = torch.softmax(F.linear(x, router), dim=-1, dtype=torch.float32)
    weights, experts = torch.topk(probs, top_k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, experts


class SparseMoE(nn.Module):
    """Router + experts of one sparse layer; `forward(x [T, hidden], kind)` like the dense MLP."""

    def __init__(self, config: ModelConfig, path: str = DENSE) -> None:
        super().__init__()
        moe = config.moe
        assert moe is not None, "SparseMoE needs a config with MoE settings"
        self.moe, self.path = moe, path
        self.router = nn.Parameter(torch.empty(moe.num_experts, config.hidden_size, device="meta"),
                                   requires_grad=False)
        expert = replace(config, intermediate_size=moe.expert_intermediate_size, mlp_bias=False)
        self.experts = nn.ModuleList(MLP(expert, bias=False) for _ in range(moe.num_experts))

    def extra_repr(self) -> str:
        return f"experts={self.moe.num_experts}, top_k={self.moe.top_k}, path={self.path}"

    def load_hf(self, reader: CheckpointReader, prefix: str, kinds: list[str]) -> None:
        """Fill from the checkpoint; `prefix` is the layer's `...mlp.` (Mixtral's block has another name)."""
        names = self.moe.names
        block = f"{prefix.removesuffix(MLP_PREFIX)}{names.block}."
        self.router = nn.Parameter(reader.tensor(f"{block}{names.router}.weight"), requires_grad=False)
        ours = {"gate_proj": names.gate, "up_proj": names.up, "down_proj": names.down}
        for e, expert in enumerate(self.experts):
            for name, parts in MLP_PROJECTIONS.items():
                reader.fill(getattr(expert, name), f"{block}experts.{e}.", [ours[p] for p in parts], kinds)

    def forward(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        weights, experts = route(x, self.router, self.moe.top_k, self.moe.renormalize)
        if self.moe.weights_in_model_dtype:
            weights = weights.to(x.dtype)
        if self.path == GROUPED:
            return self._grouped(x, kind, weights, experts)
        return self._dense(x, kind, weights, experts)

    def _dense(self, x: torch.Tensor, kind: str, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        ids = torch.arange(self.moe.num_experts, device=x.device)
        chosen = experts.unsqueeze(-1) == ids  # [T, k, E]
        combine = (chosen.to(weights.dtype) * weights.unsqueeze(-1)).sum(1)  # [T, E], zero where not chosen
        hit = chosen.any(1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            # masked, not only multiplied by zero: an unchosen expert's Inf must not become NaN
            out = out + (expert(x, kind) * combine[:, e:e + 1]).masked_fill(~hit[:, e:e + 1], 0.0).to(x.dtype)
        return out

    def _grouped(self, x: torch.Tensor, kind: str, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        try:
            return self._run_groups(x, kind, weights, experts)
        except Exception as exc:
            raise GroupedPathError(f"grouped experts: {type(exc).__name__}: {exc}") from exc

    def _run_groups(self, x: torch.Tensor, kind: str, weights: torch.Tensor, experts: torch.Tensor) -> torch.Tensor:
        top_k = experts.shape[1]
        flat = experts.reshape(-1)
        order = torch.argsort(flat, stable=True)  # pairs by expert, each token's pairs in its top-k order
        tokens = order // top_k
        counts = torch.bincount(flat, minlength=self.moe.num_experts).tolist()
        rows, start, parts = x[tokens], 0, []
        for e, count in enumerate(counts):
            if count:
                parts.append(self.experts[e](rows[start:start + count], kind))
            start += count
        weighted = (torch.cat(parts) * weights.reshape(-1)[order].unsqueeze(-1)).to(x.dtype)
        return torch.zeros_like(x).index_add_(0, tokens, weighted)


class SparseLayers(DecoderModel):
    """A family whose config.moe marks sparse layers: those get a SparseMoE, the others the family's dense MLP."""

    @classmethod
    def make_mlp(cls, config: ModelConfig, layer_index: int) -> nn.Module:
        if config.moe is not None and config.moe.is_sparse(layer_index):
            return SparseMoE(config)
        return super().make_mlp(config, layer_index)

    @classmethod
    def mlp_shapes(cls, config: ModelConfig, layer_index: int, prefix: str) -> dict[str, tuple[int, ...]]:
        if config.moe is not None and config.moe.is_sparse(layer_index):
            return config.moe.expert_tensor_shapes(prefix.removesuffix(MLP_PREFIX), config.hidden_size)
        return super().mlp_shapes(config, layer_index, prefix)


def sparse_blocks(model: nn.Module) -> list[SparseMoE]:
    return [m for m in model.modules() if isinstance(m, SparseMoE)]


def use_expert_path(model: nn.Module, path: str) -> None:
    """Run every sparse block of `model` with `path` ("dense" or "grouped")."""
    if path not in EXPERT_PATHS:
        raise ValueError(f"expert path {path!r} is not one of {EXPERT_PATHS}")
    for block in sparse_blocks(model):
        block.path = path


def keep_grouped_eager_under_compile() -> None:
    """Leave the grouped expert path out of torch.compile's graphs (the group sizes are data: run eagerly inside a
    compiled forward, never specialised). Done when a compiled forward is built, not at import:
    torch.compiler.disable imports dynamo, about 2 s of every start."""
    if not getattr(SparseMoE._grouped, "bringup_not_traced", False):
        SparseMoE._grouped = torch.compiler.disable(SparseMoE._grouped)  # type: ignore[method-assign]
        SparseMoE._grouped.bringup_not_traced = True  # type: ignore[attr-defined]
