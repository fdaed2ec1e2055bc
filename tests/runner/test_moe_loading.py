"""MoE settings read strictly from config.json, and expert tensors checked by name and shape before loading."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file, save_file

from bringup.errors import BringupError
from bringup.runner.model.families import hf_tensor_shapes
from bringup.runner.sources.directory.hf_config import read_hf_config
from tests.runner.hf_moe_fixtures import make_hf_moe_model, mixtral_config, qwen3_moe_config
from tests.runner.test_cli import assert_one_line_error, run_cli


def test_settings_follow_transformers_rules_for_sparse_layers_and_renormalisation():
    mixtral = read_hf_config(mixtral_config().to_dict()).moe
    assert (mixtral.num_experts, mixtral.top_k, mixtral.expert_intermediate_size) == (5, 2, 40)
    assert mixtral.renormalize and mixtral.sparse_layers == (0, 1, 2) and not mixtral.weights_in_model_dtype
    step = read_hf_config(qwen3_moe_config(decoder_sparse_step=2).to_dict())
    assert step.moe.sparse_layers == (1,) and not step.moe.renormalize and step.moe.weights_in_model_dtype
    assert step.intermediate_size == 56 and step.moe.expert_intermediate_size == 40 and step.head_dim == 16
    only = read_hf_config(qwen3_moe_config(decoder_sparse_step=1, mlp_only_layers=[0, 2],
                                                norm_topk_prob=True).to_dict()).moe
    assert only.sparse_layers == (1,) and only.renormalize


def test_hub_spelling_num_experts_and_transformers_5_spelling_num_local_experts_both_read():
    saved = qwen3_moe_config(num_experts=7).to_dict()  # transformers 5 writes the alias num_local_experts
    hub = {k: v for k, v in saved.items() if k != "num_local_experts"} | {"num_experts": 7}
    assert read_hf_config(saved).moe.num_experts == read_hf_config(hub).moe.num_experts == 7


@pytest.mark.parametrize(("field", "value", "words"), [
    ("num_experts_per_tok", 6, "more than the 5 experts"),
    ("num_experts_per_tok", 0, "positive integer"),
    ("num_local_experts", "5", "positive integer"),
    ("norm_topk_prob", "yes", "true or false"),
    ("decoder_sparse_step", 0, "positive integer"),
    ("moe_intermediate_size", 2.5, "positive integer"),
    ("mlp_only_layers", [0, 3], "layer indices from 0 to 2"),
    ("mlp_only_layers", "0", "layer indices"),
])
def test_wrong_moe_settings_are_refused_in_one_line_naming_the_field(field, value, words):
    cfg = qwen3_moe_config().to_dict() | {field: value}
    with pytest.raises(BringupError) as error:
        read_hf_config(cfg, source="config.json")
    message = str(error.value)
    assert "\n" not in message and field in message and words in message, message


def test_expected_tensors_are_the_hub_names_fixtures_write(tmp_path):
    saved = {}
    for name, config in (("mixtral", mixtral_config()), ("qwen3_moe", qwen3_moe_config())):
        make_hf_moe_model(tmp_path / name, config)
        saved[name] = {k: tuple(v.shape) for k, v in load_file(str(tmp_path / name / "model.safetensors")).items()}
        assert hf_tensor_shapes(read_hf_config(config.to_dict())) == saved[name]
    assert saved["mixtral"]["model.layers.0.block_sparse_moe.experts.4.w2.weight"] == (72, 40)
    assert saved["qwen3_moe"]["model.layers.1.mlp.experts.4.down_proj.weight"] == (72, 40)
    assert saved["qwen3_moe"]["model.layers.0.mlp.down_proj.weight"] == (72, 56)  # a dense layer of Qwen3-MoE


@pytest.mark.parametrize(("name", "change"), [
    ("model.layers.2.block_sparse_moe.experts.3.w3.weight", "drop"),
    ("model.layers.0.block_sparse_moe.gate.weight", "drop"),
    ("model.layers.1.block_sparse_moe.experts.4.w2.weight", "reshape"),
])
def test_missing_or_misshapen_expert_tensor_is_refused_in_one_line_naming_it(tmp_path, monkeypatch, capsys,
                                                                             name, change):
    make_hf_moe_model(tmp_path, mixtral_config())
    path = tmp_path / "model.safetensors"
    tensors = load_file(str(path))
    if change == "drop":
        del tensors[name]
    else:
        tensors[name] = torch.zeros(72, 39)
    save_file(tensors, str(path), metadata={"format": "pt"})
    code, _, err = run_cli(monkeypatch, capsys, "generate", "Hello", "--model", str(tmp_path), "--device", "cpu",
                           "--profile", str(tmp_path / "none.yaml"), "--max-tokens", "2")
    assert_one_line_error(code, err, repr(name), "missing" if change == "drop" else "[72, 39]")
