"""Gemma 3 against transformers on tiny random models (8 layers, so local and global layers interleave by the rule
of 6: layer 5 global; a sliding window of 4; head_dim 32; float32): prompt logits within 1e-4 and 32 greedy tokens
identical through the engine's paged KV cache, three sequences batched so every decode step crosses the window;
linear rope scaling on the global layers; a GGUF file written as llama.cpp writes one (its names, its norms + 1)
loads to the same logits; the host kernels decline what they cannot compute, with the reason."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from bringup.errors import BringupError
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.host.decode_layers import cannot_fuse
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.plan import attention_limits
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.directory.hf_config import read_hf_config
from bringup.runner.sources.directory.loader import read_config
from tests.runner.hf_fixtures import random_model, save_tokenizer
from tests.runner.parity_check import GREEDY_TOKENS, MAX_LOGIT_ERROR
from tests.runner.stated import stated

VOCAB, HEAD_DIM, WINDOW = 320, 32, 4
PROMPTS = [torch.randint(2, VOCAB, (n,), generator=torch.Generator().manual_seed(n)).tolist() for n in (20, 9, 14)]
LOCAL = [True] * 5 + [False] + [True] * 2  # layer i is global when (i + 1) % 6 == 0
GREEDY = SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0, ignore_eos=True)
GGUF_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "post_attention_norm",
              "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm",
              "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def make_gemma3(path: Path, **extra: Any) -> torch.nn.Module:
    """A random-init Gemma3ForCausalLM (eager attention) saved with save_pretrained, with a tokenizer;
    query_pre_attn_scalar is head_dim, as a GGUF file implies, unless `extra` says otherwise."""
    from transformers import Gemma3TextConfig

    kw = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=8, num_attention_heads=4,
              num_key_value_heads=2, head_dim=HEAD_DIM, sliding_window=WINDOW, query_pre_attn_scalar=HEAD_DIM,
              max_position_embeddings=256, bos_token_id=0, eos_token_id=1, pad_token_id=0)
    model = random_model(Gemma3TextConfig(**(kw | extra)), norm_centre=0.0)
    model.generation_config.eos_token_id = None
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    save_tokenizer(path, VOCAB)
    return model


@pytest.fixture(scope="module")
def gemma3(tmp_path_factory) -> tuple[Path, torch.nn.Module, list[list[int]]]:
    """The model directory, the transformers model, and its 32 greedy tokens after each of PROMPTS."""
    path = tmp_path_factory.mktemp("gemma3")
    hf = make_gemma3(path)
    with torch.no_grad():
        tokens = [hf.generate(torch.tensor([p]), max_new_tokens=GREEDY_TOKENS, do_sample=False,
                              pad_token_id=0)[0, len(p):].tolist() for p in PROMPTS]
    return path, hf, tokens


def _engine(model: Path, tmp_path: Path) -> LLMEngine:
    return LLMEngine.create(EngineOptions(model_dir=model, device="cpu", max_model_len=128, max_num_seqs=4,
                                          profile_path=tmp_path / "absent.yaml", measurements=stated()))


def _prompt_logits_match(engine: LLMEngine, hf: torch.nn.Module) -> None:
    """Logits at every position of the first prompt (20 tokens: five windows) within MAX_LOGIT_ERROR."""
    ours = engine.executor.run_chunks([SeqChunk(PROMPTS[0], 0, [0, 1])], all_positions=True)
    with torch.no_grad():
        assert (ours - hf(torch.tensor([PROMPTS[0]])).logits[0]).abs().max().item() <= MAX_LOGIT_ERROR


def _batched_greedy_matches(engine: LLMEngine, want: list[list[int]]) -> None:
    """The three prompts in one batch: each sequence's 32 greedy tokens are transformers' for that prompt alone."""
    assert [out.token_ids for out in engine.generate(PROMPTS, GREEDY)] == want
    assert engine.stats()["kv_blocks_used"] == 0


def test_logits_and_batched_greedy_tokens_match_transformers(tmp_path, gemma3):
    path, hf, want = gemma3
    engine = _engine(path, tmp_path)
    c = engine.executor.model.config
    assert (c.local_rope_layers, c.sliding_layers, c.sliding_window) == (LOCAL, LOCAL, WINDOW)
    assert (c.rope_theta, c.rope_scaling, c.local_rope_theta) == (1e6, None, 1e4)
    assert (c.attn_logit_softcap, c.final_logit_softcap) == (None, None)
    assert c.tie_word_embeddings and c.hidden_act == "gelu_pytorch_tanh"
    _prompt_logits_match(engine, hf)
    _batched_greedy_matches(engine, want)


def test_the_window_and_the_local_rope_change_the_answer(gemma3):
    """transformers without the window, or with one rope base for every layer, computes other logits: the parity
    above holds only with both."""
    from transformers import Gemma3ForCausalLM

    hf = gemma3[1]
    with torch.no_grad():
        want = hf(torch.tensor([PROMPTS[0]])).logits[0]
        for change in ({"sliding_window": 4096}, {"rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 1e6},
                "full_attention": {"rope_type": "default", "rope_theta": 1e6}}}):
            config = copy.deepcopy(hf.config)
            for key, value in change.items():
                setattr(config, key, value)
            other = Gemma3ForCausalLM(config).eval()
            other.load_state_dict(hf.state_dict())
            assert (other(torch.tensor([PROMPTS[0]])).logits[0] - want).abs().max().item() > 1e-2, change


def test_linear_rope_scaling_and_the_attention_scale(tmp_path):
    """Linear scaling (factor 8) on the global layers' rope only, and query_pre_attn_scalar 24 (not head_dim)."""
    hf = make_gemma3(tmp_path / "m", rope_scaling={"rope_type": "linear", "factor": 8.0}, query_pre_attn_scalar=24)
    saved = json.loads((tmp_path / "m" / "config.json").read_text())
    assert saved["rope_parameters"]["full_attention"] == {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}
    engine = _engine(tmp_path / "m", tmp_path)
    c = engine.executor.model.config
    assert (c.rope_scaling, c.local_rope_theta, c.attention_scale) == ({"rope_type": "linear", "factor": 8.0}, 1e4,
                                                                       24**-0.5)
    _prompt_logits_match(engine, hf)


def test_the_older_config_spelling_reads_the_same(gemma3):
    """Configs on the Hub before transformers 5: rope_theta, rope_scaling, rope_local_base_freq and
    sliding_window_pattern at the top level, no layer_types."""
    new = json.loads((gemma3[0] / "config.json").read_text())
    new["rope_parameters"]["full_attention"] |= {"rope_type": "linear", "factor": 8.0}
    old = {k: v for k, v in new.items() if k not in ("rope_parameters", "layer_types", "_sliding_window_pattern")}
    old |= {"rope_theta": 1e6, "rope_local_base_freq": 1e4, "sliding_window_pattern": 6,
            "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    assert read_hf_config(old) == read_hf_config(new)


@pytest.mark.parametrize(("change", "words"), [
    ({"rope_parameters": {"full_attention": {"rope_type": "yarn", "factor": 8.0}}},
     "rope_parameters.full_attention: rope scaling type 'yarn' is not supported (only 'llama3' and 'linear')"),
    ({"rope_parameters": {"sliding_attention": {"rope_type": "linear", "factor": 2.0}}},
     "rope scaling on the sliding layers is not supported"),
    ({"use_bidirectional_attention": True}, "use_bidirectional_attention true is not supported"),
    ({"layer_types": ["full_attention"] * 3}, "layer_types must be a list of 8 entries"),
    ({"sliding_window_pattern": 0, "layer_types": None}, "sliding_window_pattern must be a positive integer"),
])
def test_unsupported_or_malformed_fields_are_refused_in_one_line(gemma3, change, words):
    cfg = json.loads((gemma3[0] / "config.json").read_text()) | change
    with pytest.raises(BringupError) as err:
        read_hf_config(cfg, source="config.json")
    assert words in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- host kernels and the plan


def test_the_plan_and_the_host_kernels_decline_what_they_cannot_compute(tmp_path, gemma3):
    """The fused decode layers decline a Gemma layer; paged decode is kept out while the window bites (the plan),
    SDPA takes the window mask."""
    from tests.runner.test_family_parity import _profile

    path, _, want = gemma3
    engine = LLMEngine.create(EngineOptions(model_dir=path, device="cpu", max_model_len=128,
                                            max_num_seqs=4, profile_path=_profile(tmp_path),
                                            measurements=stated(paged_decode=(True, "stated 2x faster"))))
    assert engine.plan.attention.value == ["sdpa_math", "matmul_softmax"]
    assert "paged_decode not used: has no sliding-window mask (Gemma3ForCausalLM: window 4 < max_model_len 128)" \
        in engine.plan.attention.evidence
    assert "a Gemma2Layer, not a plain pre-norm layer" in cannot_fuse(engine.executor.model, 128)
    assert attention_limits(engine.executor.model.config, WINDOW) == {}  # a window that never bites limits nothing
    _batched_greedy_matches(engine, want)


def test_paged_decode_serves_the_global_layers(tmp_path, gemma3, monkeypatch):
    """With the kernel set, decode steps of the global layers read the cache in place and the sliding layers take
    the gather path with their window mask: the same tokens as transformers."""
    from bringup.runner.host import paged_decode
    from bringup.runner.host.paged_decode import DecodeAttention
    from tests.runner.host_compiler import compiler

    if compiler() is None:
        pytest.skip("no C++ compiler (CXX, g++, c++ or clang++) found to build the host kernels")
    calls, run = [], paged_decode.run
    monkeypatch.setattr(paged_decode, "run", lambda *args: calls.append(args[0].shape[0]) or run(*args))
    engine = _engine(gemma3[0], tmp_path)
    engine.executor.model.decode_attend = DecodeAttention(engine.fallbacks, instead="gather + matmul_softmax")
    _batched_greedy_matches(engine, gemma3[2])
    assert len(calls) >= GREEDY_TOKENS - 1  # at least one decode step of every token: the global layer's
    assert engine.stats()["fallbacks"]["op"] == 0


# ---------------------------------------------------------------- GGUF


def write_gemma3_gguf(path: Path, hf: torch.nn.Module, tokenizer_dir: Path, skip: tuple[str, ...] = ()) -> Path:
    """`hf` as llama.cpp's converter writes a Gemma 3 (gemma3.* keys, its tensor names, 1 added to every norm
    weight, the tied head left out), in float32, with the test tokenizer's vocabulary; `skip`: keys left out."""
    gguf = pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package")
    from tests.runner.gguf_files import _write_tokenizer

    c = hf.config
    writer = gguf.GGUFWriter(str(path), "gemma3")
    for key, value in {"context_length": c.max_position_embeddings, "embedding_length": c.hidden_size,
                       "block_count": c.num_hidden_layers, "feed_forward_length": c.intermediate_size,
                       "attention.head_count": c.num_attention_heads,
                       "attention.head_count_kv": c.num_key_value_heads, "attention.key_length": c.head_dim,
                       "attention.value_length": c.head_dim, "attention.sliding_window": c.sliding_window}.items():
        if key not in skip:
            writer.add_uint32(f"gemma3.{key}", value)
    writer.add_float32("gemma3.attention.layer_norm_rms_epsilon", c.rms_norm_eps)
    writer.add_float32("gemma3.rope.freq_base", c.rope_parameters["full_attention"]["rope_theta"])
    _write_tokenizer(writer, tokenizer_dir, "gpt2", "gpt-2", False, None)
    for name, tensor in hf.state_dict().items():
        if name == "lm_head.weight":
            continue
        values = tensor.detach().float().numpy()
        writer.add_tensor(_gguf_name(name), values + np.float32(1) if name.endswith("norm.weight") else values)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _gguf_name(hf_name: str) -> str:
    top = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    if hf_name in top:
        return top[hf_name]
    _, _, layer, rest = hf_name.removesuffix(".weight").split(".", 3)
    return f"blk.{layer}.{GGUF_NAMES[rest]}.weight"


def test_a_gguf_file_loads_to_the_same_logits_and_tokens(tmp_path, gemma3):
    """The model's query_pre_attn_scalar (head_dim), local rope base and layer pattern are what a GGUF implies."""
    directory, hf, want = gemma3
    path = write_gemma3_gguf(tmp_path / "gemma3.gguf", hf, directory)
    engine = _engine(path, tmp_path)
    model = engine.executor.model
    fields = ("sliding_layers", "local_rope_layers", "sliding_window", "rope_theta", "rope_scaling", "local_rope_theta",
              "attention_scale", "hidden_act", "tie_word_embeddings", "head_dim", "final_logit_softcap")
    expected = read_config(directory)
    assert {f: getattr(model.config, f) for f in fields} == {f: getattr(expected, f) for f in fields}
    layer, ref = model.layers[0], hf.model.layers[0]
    for ours, theirs in ((layer.pre_feedforward_layernorm, ref.pre_feedforward_layernorm),
                         (layer.post_attention_layernorm, ref.post_attention_layernorm),
                         (layer.self_attn.q_norm, ref.self_attn.q_norm), (model.norm, hf.model.norm)):
        assert torch.allclose(ours.weight, 1 + theirs.weight, atol=1e-6)  # the file's +1 taken off, added back once
    _prompt_logits_match(engine, hf)
    _batched_greedy_matches(engine, want)


def test_a_gguf_file_without_its_window_is_refused_by_name(tmp_path, gemma3):
    from bringup.runner.sources.gguf.config import read_gguf_config
    from bringup.runner.sources.gguf.reader import open_gguf

    path = write_gemma3_gguf(tmp_path / "g.gguf", gemma3[1], gemma3[0], skip=("attention.sliding_window",))
    with pytest.raises(BringupError) as err:
        read_gguf_config(open_gguf(path))
    assert "metadata key 'gemma3.attention.sliding_window' is missing" in str(err.value)
    assert "\n" not in str(err.value)
