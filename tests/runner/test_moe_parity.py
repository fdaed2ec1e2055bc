"""Mixtral and Qwen3-MoE against transformers: the router's choices (ties included), each sparse block on both
expert paths, and whole models (float32 logits within 1e-4, 32 identical greedy tokens through the engine)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.checkpoint import layer_prefix
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.moe import DENSE, EXPERT_PATHS, GROUPED, SparseMoE, route, sparse_blocks
from bringup.runner.plan.plan import GROUPED_EXPERT_OPS
from bringup.runner.sources.directory.hf_config import read_hf_config
from bringup.runner.weights.checkpoint_reader import CheckpointReader
from tests.runner.hf_moe_fixtures import (
    make_hf_moe_model,
    mixtral_config,
    ops_profile,
    qwen3_moe_config,
    write_profile,
)
from tests.runner.parity_check import assert_matches_transformers
from tests.runner.stated import stated

FAMILIES = {
    "mixtral": mixtral_config,
    "qwen3_moe-renormalised": lambda **kw: qwen3_moe_config(norm_topk_prob=True, **kw),
    "qwen3_moe-raw-weights": lambda **kw: qwen3_moe_config(norm_topk_prob=False, **kw),
}


def ours(hf_config) -> ModelConfig:  # type: ignore[no-untyped-def]
    return read_hf_config(hf_config.to_dict())


def tied_router(experts: int, hidden: int, dtype: torch.dtype) -> torch.Tensor:
    """Rows 1, 2 and 4 equal (their logits tie exactly), row 3 all zeros, row 0 its own."""
    gen = torch.Generator().manual_seed(5)
    shared, own = torch.randn(hidden, generator=gen), torch.randn(hidden, generator=gen)
    rows = [own, shared, shared, torch.zeros(hidden), shared] + [torch.randn(hidden, generator=gen)
                                                               for _ in range(experts - 5)]
    return torch.stack(rows).to(dtype)


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("router_kind", ["tied-rows", "all-zero"])
def test_router_picks_the_experts_transformers_picks_when_probabilities_tie(family, dtype, router_kind):
    """Equal logits give equal float32 probabilities; torch.topk of those probabilities (not of the logits, not in
    the model dtype) is what transformers runs, so ties resolve to the same experts. bfloat16 logits tie often."""
    hf_config = FAMILIES[family]()
    config = ours(hf_config)
    hf = _hf_block(hf_config).to(dtype)
    weight = tied_router(config.moe.num_experts, config.hidden_size, dtype)
    if router_kind == "all-zero":
        weight.zero_()
    x = torch.randn(64, config.hidden_size, generator=torch.Generator().manual_seed(1)).to(dtype)
    with torch.no_grad():
        hf.gate.weight.copy_(weight)
        _, hf_weights, hf_experts = hf.gate(x)
    weights, experts = route(x, weight, config.moe.top_k, config.moe.renormalize)
    assert torch.equal(experts, hf_experts)
    assert torch.equal(weights.to(hf_weights.dtype), hf_weights)
    if router_kind == "all-zero":  # every expert ties for every token: the choice is torch.topk's tie order
        assert (experts == experts[0]).all()


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("path", EXPERT_PATHS)
def test_sparse_block_matches_transformers_on_both_expert_paths(tmp_path, family, path):
    hf_config = FAMILIES[family]()
    hf_model = make_hf_moe_model(tmp_path, hf_config)
    config, layer = ours(hf_config), config_sparse_layer(hf_config)
    block = _our_block(config, tmp_path, layer, path)
    x = torch.randn(37, config.hidden_size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = hf_model.model.layers[layer].mlp(x.unsqueeze(0))[0]
        got = block(x, "out_in")
    assert (got - ref).abs().max().item() <= 1e-5


@pytest.mark.parametrize("family", list(FAMILIES))
def test_bfloat16_block_rounds_the_routing_weights_as_transformers_does(tmp_path, family):
    """Mixtral scales the experts' outputs by float32 weights, Qwen3-MoE by weights rounded to the model dtype
    first. The grouped path runs the same row groups through the same matmuls as transformers' reference expert
    loop ("eager"; its default "grouped_mm" rounds differently), so it matches bit for bit; dense runs every row
    through every expert, so it matches within rounding."""
    hf_config = FAMILIES[family]()
    hf_model = make_hf_moe_model(tmp_path, hf_config)
    config, layer = ours(hf_config), config_sparse_layer(hf_config)
    hf_block = hf_model.model.layers[layer].mlp.to(torch.bfloat16)
    hf_block.experts.config._experts_implementation = "eager"
    x = torch.randn(37, config.hidden_size, generator=torch.Generator().manual_seed(2)).to(torch.bfloat16)
    with torch.no_grad():
        ref = hf_block(x.unsqueeze(0))[0]
        grouped, dense = (_our_block(config, tmp_path, layer, path, torch.bfloat16)(x, "out_in")
                          for path in (GROUPED, DENSE))
    assert torch.equal(grouped, ref)
    assert torch.allclose(dense.float(), ref.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_dense_and_grouped_paths_give_the_same_numbers(tmp_path, family):
    hf_config = FAMILIES[family]()
    make_hf_moe_model(tmp_path, hf_config)
    config, layer = ours(hf_config), config_sparse_layer(hf_config)
    dense, grouped = (_our_block(config, tmp_path, layer, p) for p in (DENSE, GROUPED))
    for tokens in (1, 2, 3, 50):  # with 1-3 tokens some experts get no token at all
        x = torch.randn(tokens, config.hidden_size, generator=torch.Generator().manual_seed(tokens))
        with torch.no_grad():
            a, b = dense(x, "out_in"), grouped(x, "out_in")
        assert torch.allclose(a, b, rtol=0, atol=1e-6), (tokens, (a - b).abs().max().item())


def config_sparse_layer(hf_config) -> int:  # type: ignore[no-untyped-def]
    return ours(hf_config).moe.sparse_layers[0]


def _hf_block(hf_config):  # type: ignore[no-untyped-def]
    from transformers.models.mixtral.modeling_mixtral import MixtralSparseMoeBlock
    from transformers.models.qwen3_moe.modeling_qwen3_moe import Qwen3MoeSparseMoeBlock

    cls = MixtralSparseMoeBlock if hf_config.model_type == "mixtral" else Qwen3MoeSparseMoeBlock
    return cls(hf_config).eval()


def _our_block(config: ModelConfig, model_dir, layer: int, path: str,  # type: ignore[no-untyped-def]
               dtype: torch.dtype = torch.float32) -> SparseMoE:
    tensors = load_file(str(model_dir / "model.safetensors"))
    block = SparseMoE(config, path)
    reader = CheckpointReader(tensors.get, torch.device("cpu"), dtype)
    block.load_hf(reader, layer_prefix(layer) + "mlp.", ["out_in"])  # the prefix DecoderLayer gives its MLP
    return block


MODELS = {
    "mixtral-zero-router-in-layer-1": (mixtral_config, (1,)),
    "mixtral-sliding-window-8": (lambda: mixtral_config(sliding_window=8), ()),  # prompt 40 + 32 tokens: it bites
    "qwen3_moe-sparse-step-2-renormalised": (lambda: qwen3_moe_config(norm_topk_prob=True), ()),
    "qwen3_moe-mlp-only-0-raw-weights-zero-router-in-layer-2": (
        lambda: qwen3_moe_config(norm_topk_prob=False, decoder_sparse_step=1, mlp_only_layers=[0]), (2,)),
}


@pytest.mark.parametrize("path", EXPERT_PATHS)
@pytest.mark.parametrize("model", list(MODELS))
def test_model_logits_and_greedy_tokens_match_transformers(tmp_path, model, path):
    """Through the real engine; the plan picks the path: "dense" without a profile, "grouped" from a profile whose
    verify-ops records show the ops it needs passed."""
    make_config, zero_routers = MODELS[model]
    hf_config = make_config()
    hf = make_hf_moe_model(tmp_path / "model", hf_config, zero_router_layers=zero_routers)
    hf.generation_config.eos_token_id = None
    profile = tmp_path / ("grouped.yaml" if path == GROUPED else "absent.yaml")
    if path == GROUPED:
        write_profile(profile, ops_profile(GROUPED_EXPERT_OPS))
    engine = LLMEngine.create(EngineOptions(model_dir=tmp_path / "model", device="cpu", max_model_len=128,
                                            max_num_seqs=2, profile_path=profile, measurements=stated()))
    assert engine.plan.experts.value == path, engine.plan.experts.evidence
    assert {block.path for block in sparse_blocks(engine.executor.model)} == {path}
    prompt = torch.randint(2, 320, (40,), generator=torch.Generator().manual_seed(7)).tolist()
    ref_logits = assert_matches_transformers(engine, hf, prompt)
    window = hf.config.sliding_window
    if window:  # the window matters: without it transformers computes other logits
        hf.config.sliding_window = None
        with torch.no_grad():
            assert (hf(torch.tensor([prompt])).logits[0] - ref_logits).abs().max().item() > 1e-2
        hf.config.sliding_window = window
    assert engine.fallbacks.counts["op"] == 0
