"""The decoder is made of real modules: its weights are parameters and buffers, one family per architecture."""

from __future__ import annotations

import dataclasses

import torch

from bringup.runner.model.checkpoint import hf_tensor_names
from bringup.runner.model.families import FAMILIES, SUPPORTED_ARCHITECTURES, build_model
from bringup.runner.model.families.llama import LlamaDecoder
from bringup.runner.model.families.qwen2 import Qwen2Decoder
from bringup.runner.sources.builtin_model import builtin_config, builtin_tensors, load_builtin
from bringup.runner.weights.layout_linear import LayoutLinear, WeightLayout


def test_every_supported_architecture_has_a_family():
    assert set(FAMILIES) == set(SUPPORTED_ARCHITECTURES)
    assert FAMILIES["MistralForCausalLM"] is LlamaDecoder and FAMILIES["Qwen2ForCausalLM"] is Qwen2Decoder


def test_weights_and_caches_are_the_modules_parameters_and_buffers():
    model = load_builtin(torch.float32, "cpu")
    model.allocate_kv_cache(num_blocks=2, block_size=16)
    params = dict(model.named_parameters())
    assert {"embed", "norm.weight", "layers.0.input_layernorm.weight"} <= set(params)
    buffers = dict(model.named_buffers())
    c = model.config
    assert buffers["layers.0.self_attn.qkv_proj.weight_out_in"].shape == ((c.num_heads + 2 * c.num_kv_heads)
                                                                          * c.head_dim, c.hidden_size)
    assert buffers["layers.0.mlp.gate_up_proj.weight_out_in"].shape == (2 * c.intermediate_size, c.hidden_size)
    assert buffers["layers.3.self_attn.cache.k"] is model.k_caches[3]
    assert set(model.state_dict()) >= {"lm_head.weight_out_in", "embed"}  # the caches are not weights
    assert not any(".cache." in name or "rope" in name for name in model.state_dict())


def test_a_tied_head_shares_the_embedding_and_is_counted_once():
    config = dataclasses.replace(builtin_config(), tie_word_embeddings=True)
    assert "lm_head.weight" not in hf_tensor_names(config)
    model = build_model(config, torch.float32, "cpu")
    model.load_hf_tensors(builtin_tensors(builtin_config()).get)
    assert model.lm_head.weight("out_in").data_ptr() == model.embed.data_ptr()
    untied = load_builtin(torch.float32, "cpu")
    head = untied.lm_head.weight("out_in")
    assert untied.weight_bytes() - model.weight_bytes() == head.numel() * head.element_size()


def test_layout_changes_reach_every_linear_layer_including_the_head():
    model = load_builtin(torch.float32, "cpu")
    linears = model.linear_layers()
    assert len(linears) == 4 * model.config.num_layers + 1 and model.lm_head in linears
    before = model.weight_bytes()
    model.add_kind("in_out", "out_in")
    assert all(layer.kinds == ["in_out", "out_in"] for layer in linears)
    model.use_layout(WeightLayout("in_out", "in_out"))
    assert all(layer.kinds == ["in_out"] for layer in linears) and model.weight_bytes() == before
    assert all(isinstance(m, LayoutLinear) for m in linears)
