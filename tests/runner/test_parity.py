"""Parity with transformers: float32 logits within 1e-4 and 32 identical greedy tokens."""

from __future__ import annotations

import pytest
import torch

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.batch_inputs import SeqChunk
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import compiler
from tests.runner.parity_check import assert_matches_transformers

CASES = {
    "llama-llama3-rope-untied": dict(arch="llama", rope_llama3=True, tied=False),
    "qwen2-bias-tied": dict(arch="qwen2", tied=True),
    "llama-sharded-tied": dict(arch="llama", tied=True, max_shard_size="60KB"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_logits_and_greedy_tokens_match_transformers(tmp_path, case):
    hf = make_hf_model(tmp_path, **CASES[case])
    if "sharded" in case:
        assert (tmp_path / "model.safetensors.index.json").is_file()
    hf.generation_config.eos_token_id = None
    engine = LLMEngine.create(EngineOptions(model_dir=tmp_path, device="cpu", max_model_len=128,
                                            max_num_seqs=2, profile_path=tmp_path / "absent.yaml"))
    prompt = torch.randint(2, 320, (40,), generator=torch.Generator().manual_seed(7)).tolist()
    assert_matches_transformers(engine, hf, prompt)
    assert engine.stats()["kv_blocks_used"] == 0


@pytest.mark.parametrize(("small", "large"), [("in_out", "out_in"), ("in_out", "packed"), ("slices", "out_in"),
                                                    ("panels", "packed")])
def test_dual_layout_matches_transformers_in_prefill_and_decode(tmp_path, small, large):
    """Weights kept in two layouts: prefill (many rows) uses `large`, decode (one row) `small`."""
    from bringup.runner.model.batch_inputs import build_inputs
    from bringup.runner.model.decoder import WeightLayout
    from bringup.runner.sources.directory.loader import load_model, read_config

    hf = make_hf_model(tmp_path, arch="qwen2", tied=True)
    config = read_config(tmp_path)
    from bringup.runner.weights.registry import packed_check

    if "panels" in (small, large) and compiler() is None:
        pytest.skip("no C++ compiler (CXX, g++, c++ or clang++) found to build the host panel kernel")
    if large == "packed" and packed_check(torch.device("cpu"), torch.float32):
        pytest.skip(f"packed weights do not run here: {packed_check(torch.device('cpu'), torch.float32)}")
    model = load_model(tmp_path, config, torch.float32, "cpu", WeightLayout(small, large, 1))
    model.allocate_kv_cache(4, 16)
    prompt = torch.randint(2, 320, (20,), generator=torch.Generator().manual_seed(3)).tolist()
    with torch.no_grad():
        ref = hf(torch.tensor([prompt])).logits[0]
    ours = []
    for chunk in (SeqChunk(prompt[:19], 0, [0, 1]), SeqChunk(prompt, 19, [0, 1])):
        inputs = build_inputs([chunk], 16, config.num_queries_per_kv, torch.device("cpu"))
        with torch.inference_mode():
            ours.append(model.logits(model(inputs.input_ids, inputs.positions, inputs.meta)))
    assert (torch.cat(ours) - ref).abs().max().item() <= 1e-4
