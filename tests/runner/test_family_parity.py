"""Qwen3, Phi-3 and Gemma-2 against transformers: float32 logits within 1e-4 and 32 identical greedy tokens, on
random-init models of odd sizes with a sliding window (8) smaller than prompt + generation and Gemma-2's soft-caps
small enough to bite; the plan keeps attention that cannot run their math out; unsupported features refused."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.errors import BringupError
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.batch_inputs import SeqChunk, build_inputs
from bringup.runner.plan.plan import SOFTCAP_OPS, WINDOW_OPS, model_ops
from bringup.runner.sources.directory.hf_config import read_hf_config
from bringup.runner.sources.directory.loader import read_config
from tests.runner.hf_dense_fixtures import make_family_model, reload_without_window
from tests.runner.parity_check import assert_matches_transformers
from tests.runner.stated import stated

FAMILIES = ("qwen3", "phi3", "gemma2")
WINDOWED = (*FAMILIES, "mistral", "qwen2")  # Mistral and Qwen2 ran with the context capped at the window before
PROMPT = torch.randint(2, 320, (40,), generator=torch.Generator().manual_seed(7)).tolist()


def _engine(path, **options) -> LLMEngine:
    return LLMEngine.create(EngineOptions(model_dir=path, device="cpu", max_model_len=128, max_num_seqs=2,
                                          profile_path=path / "absent.yaml", **options))


@pytest.mark.parametrize("family", WINDOWED)
def test_logits_and_greedy_tokens_match_transformers(tmp_path, family):
    hf = make_family_model(tmp_path, family)
    hf.generation_config.eos_token_id = None
    engine = _engine(tmp_path)
    assert_matches_transformers(engine, hf, PROMPT)
    assert engine.stats()["kv_blocks_used"] == 0


@pytest.mark.parametrize("family", WINDOWED)
def test_the_window_changes_the_answer(tmp_path, family):
    """Without the window transformers computes other logits: the parity above holds only with the window."""
    hf = make_family_model(tmp_path, family)
    with torch.no_grad():
        windowed = hf(torch.tensor([PROMPT])).logits[0]
        unwindowed = reload_without_window(tmp_path)(torch.tensor([PROMPT])).logits[0]
    assert (windowed - unwindowed).abs().max().item() > 1e-2


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_steps_and_a_ragged_batch_keep_the_window(tmp_path, family):
    """Prefill in two chunks and then decode one token at a time (contexts past the window), two sequences of
    different lengths in one step: every position's logits match transformers."""
    from bringup.runner.sources.directory.loader import load_model

    hf = make_family_model(tmp_path, family)
    config = read_config(tmp_path)
    model = load_model(tmp_path, config, torch.float32, "cpu")
    model.allocate_kv_cache(8, 16)
    short = PROMPT[:13]
    with torch.no_grad():
        ref_long, ref_short = (hf(torch.tensor([p])).logits[0] for p in (PROMPT[:24], short))
    steps = [[SeqChunk(PROMPT[:20], 0, [0, 1]), SeqChunk(short[:11], 0, [2])]]
    steps += [[SeqChunk(PROMPT[:n], n - 1, [0, 1]), SeqChunk(short[:min(n - 9, 13)], min(n - 9, 13) - 1, [2])]
              for n in range(21, 23)]
    steps += [[SeqChunk(PROMPT[:n], n - 1, [0, 1])] for n in range(23, 25)]  # one sequence: decode without a mask
    got_long, got_short = [], []
    for chunks in steps:
        inputs = build_inputs(chunks, 16, config.num_queries_per_kv, torch.device("cpu"), config.attention_window)
        with torch.inference_mode():
            logits = model.logits(model(inputs.input_ids, inputs.positions, inputs.meta))
        starts = [0]
        for c in chunks:
            starts.append(starts[-1] + len(c.token_ids) - c.start)
        got_long.append(logits[starts[0]:starts[1]])
        if len(chunks) > 1:
            got_short.append(logits[starts[1]:starts[2]])
    assert (torch.cat(got_long) - ref_long).abs().max().item() <= 1e-4
    assert (torch.cat(got_short) - ref_short).abs().max().item() <= 1e-4


def test_window_mask_convention():
    """A query at position p sees keys in (p - window, p], as transformers' sliding_window_overlay."""
    inputs = build_inputs([SeqChunk(list(range(6)), 0, [0])], 16, 1, torch.device("cpu"), window=3)
    rows = inputs.meta.window_mask[0, 0].int().tolist()
    assert rows[5] == [0, 0, 0, 1, 1, 1] and rows[1] == [1, 1, 0, 0, 0, 0]
    no_window = build_inputs([SeqChunk(list(range(6)), 0, [0])], 16, 1, torch.device("cpu"), window=6)
    assert no_window.meta.window_mask is None  # no key can fall outside: the causal mask is enough


# ---------------------------------------------------------------- the plan


def _profile(path):
    """A profile for this CPU with SDPA (math) verified: what the plan would pick for a Llama."""
    from bringup.profiles.schema import Capabilities, Capability
    from tests.runner.test_plan_fallbacks import write_profile

    caps = Capabilities(attention={"sdpa_math": Capability(status="supported", evidence="executed check")})
    return write_profile(path / "profile.yaml", caps)


def test_gemma2_plan_excludes_sdpa_and_paged_decode_with_the_reason(tmp_path):
    make_family_model(tmp_path / "m", "gemma2")
    engine = LLMEngine.create(EngineOptions(model_dir=tmp_path / "m", device="cpu", max_model_len=128,
                                            max_num_seqs=2, profile_path=_profile(tmp_path),
                                            measurements=stated(paged_decode=(True, "stated 2x faster"))))
    attention = engine.plan.attention
    assert attention.value == ["matmul_softmax"]
    assert "sdpa_math: cannot apply attention logit soft-capping (Gemma2ForCausalLM)" in \
        attention.evidence  # the draft plan's SDPA
    assert "paged_decode not used: cannot apply attention logit soft-capping (Gemma2ForCausalLM)" in \
        attention.evidence  # the kernel start-up measured faster


def test_a_window_keeps_sdpa_but_not_paged_decode(tmp_path):
    make_family_model(tmp_path / "m", "qwen3")
    engine = LLMEngine.create(EngineOptions(model_dir=tmp_path / "m", device="cpu", max_model_len=128,
                                            max_num_seqs=2, profile_path=_profile(tmp_path),
                                            measurements=stated(paged_decode=(True, "stated 2x faster"))))
    assert engine.plan.attention.value == ["sdpa_math", "matmul_softmax"]
    assert "paged_decode not used: has no sliding-window mask (Qwen3ForCausalLM: window 8 < max_model_len 128)" in \
        engine.plan.attention.evidence
    assert engine.plan.max_model_len.value == 128  # the real window: the context is no longer capped at it


def test_a_window_wider_than_the_context_limits_nothing(tmp_path):
    make_family_model(tmp_path / "m", "qwen3")
    engine = LLMEngine.create(EngineOptions(model_dir=tmp_path / "m", device="cpu", max_model_len=8,
                                            max_num_seqs=2, profile_path=_profile(tmp_path),
                                            measurements=stated(paged_decode=(True, "stated 2x faster"))))
    assert engine.plan.attention.value == ["paged_decode", "sdpa_math", "matmul_softmax"]


def test_low_precision_needs_the_window_and_softcap_ops_only_where_used(tmp_path):
    for family in FAMILIES:
        make_family_model(tmp_path / family, family)
    gemma, phi, qwen = (read_config(tmp_path / f) for f in ("gemma2", "phi3", "qwen3"))
    assert model_ops(gemma, 128) >= WINDOW_OPS | SOFTCAP_OPS
    assert model_ops(phi, 128) >= WINDOW_OPS and not SOFTCAP_OPS & model_ops(phi, 128)
    assert not WINDOW_OPS & model_ops(qwen, 8)  # the window (8) never bites within 8 tokens
    plain = make_family_model(tmp_path / "plain", "qwen3", window=None)
    del plain
    assert not (WINDOW_OPS | SOFTCAP_OPS) & model_ops(read_config(tmp_path / "plain"), 128)


# ---------------------------------------------------------------- checkpoints and refusals


def _config(tmp_path, family, **changes) -> dict:
    make_family_model(tmp_path, family)
    cfg = json.loads((tmp_path / "config.json").read_text())
    return cfg | changes


@pytest.mark.parametrize(("family", "changes", "words"), [
    ("phi3", {"rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4, "short_factor": [1.0] * 6,
                                  "long_factor": [2.0] * 6, "original_max_position_embeddings": 64}},
     "rope scaling type 'longrope' is not supported"),
    ("phi3", {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": 0.25}},
     "partial_rotary_factor 0.25 rotates 3 of head_dim 12"),
    ("gemma2", {"use_bidirectional_attention": True}, "use_bidirectional_attention true is not supported"),
    ("gemma2", {"hidden_activation": "gelu"}, "hidden_activation 'gelu' is not supported"),
    ("gemma2", {"attn_logit_softcapping": "5"}, "attn_logit_softcapping must be a positive finite number"),
    ("qwen3", {"layer_types": ["full_attention", "sliding"]}, "layer_types must be a list of 3 entries"),
])
def test_unsupported_or_malformed_family_fields_are_refused_in_one_line(tmp_path, family, changes, words):
    cfg = _config(tmp_path, family, **changes)
    with pytest.raises(BringupError) as err:
        read_hf_config(cfg, source="config.json")
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("family", "tensor"), [("qwen3", "model.layers.1.self_attn.q_norm.weight"),
                                                 ("phi3", "model.layers.0.self_attn.qkv_proj.weight"),
                                                 ("gemma2", "model.layers.2.pre_feedforward_layernorm.weight")])
def test_a_missing_family_tensor_is_refused(tmp_path, family, tensor):
    from safetensors.torch import load_file, save_file

    make_family_model(tmp_path, family)
    weights = load_file(tmp_path / "model.safetensors")
    del weights[tensor]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BringupError, match=r"1 tensor\(s\) that config.json implies are missing") as err:
        _engine(tmp_path)
    assert tensor in str(err.value)


def test_a_misshaped_fused_tensor_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    make_family_model(tmp_path, "phi3")
    weights = load_file(tmp_path / "model.safetensors")
    name = "model.layers.0.mlp.gate_up_proj.weight"
    weights[name] = weights[name][:104].contiguous()
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(BringupError, match=r"has shape \[104, 72\] but config.json implies \[208, 72\]"):
        _engine(tmp_path)
