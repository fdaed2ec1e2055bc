"""Config parsing, built-in model determinism, tokenizers and chat templates."""

from __future__ import annotations

import json

import pytest
import torch

from bringup.errors import BringupError
from bringup.runner.sources.builtin_model import builtin_config, builtin_tensors
from bringup.runner.sources.directory.hf_config import read_hf_config
from bringup.runner.text.tokenizer import ByteTokenizer, HFTokenizer
from tests.runner.hf_fixtures import save_tokenizer


def test_builtin_weights_are_identical_on_every_build():
    a, b = builtin_tensors(builtin_config()), builtin_tensors(builtin_config())
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert a["model.layers.0.self_attn.q_proj.weight"].shape == (256, 256)


def test_config_reads_both_rope_spellings_and_refuses_others():
    base = {"architectures": ["LlamaForCausalLM"], "vocab_size": 10, "hidden_size": 8, "intermediate_size": 16,
            "num_hidden_layers": 1, "num_attention_heads": 2}
    llama3 = {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 64}
    old = read_hf_config({**base, "rope_theta": 5e5, "rope_scaling": llama3})
    new = read_hf_config({**base, "rope_parameters": {**llama3, "rope_theta": 5e5}})
    assert old.rope_theta == new.rope_theta == 5e5 and old.rope_scaling["factor"] == 8.0
    assert old.num_kv_heads == 2 and old.head_dim == 4
    with pytest.raises(BringupError, match="yarn"):
        read_hf_config({**base, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}})
    with pytest.raises(BringupError, match="hidden_size"):
        read_hf_config({"architectures": ["Qwen2ForCausalLM"], "vocab_size": 10})


MODEL_TYPES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
               "qwen3": "Qwen3ForCausalLM", "phi3": "Phi3ForCausalLM", "gemma2": "Gemma2ForCausalLM",
               "mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM"}


def test_a_config_without_architectures_is_read_by_its_model_type_with_its_familys_defaults():
    base = {"vocab_size": 10, "hidden_size": 64, "intermediate_size": 16, "num_hidden_layers": 2,
            "num_attention_heads": 4, "attention_bias": False}
    configs = {model_type: read_hf_config({**base, "model_type": model_type}) for model_type in MODEL_TYPES}
    assert {t: c.architecture for t, c in configs.items()} == MODEL_TYPES
    head_dims = {t: c.head_dim for t, c in configs.items()}
    assert head_dims == {**dict.fromkeys(MODEL_TYPES, 16), "qwen3": 128, "gemma2": 256}  # Qwen3-MoE: hidden / heads
    assert [t for t, c in configs.items() if c.moe is not None] == ["mixtral", "qwen3_moe"]
    assert configs["gemma2"].hidden_act == "gelu_pytorch_tanh" and configs["gemma2"].tie_word_embeddings
    with pytest.raises(BringupError, match="hidden_activation 'silu' is not supported"):
        read_hf_config({**base, "model_type": "gemma2", "hidden_activation": "silu"})


def test_byte_tokenizer_round_trips_and_knows_its_specials():
    tok = ByteTokenizer()
    text = "héllo <|user|> wörld"
    ids = tok.encode(text)
    assert tok.SPECIALS.index("<|user|>") in ids and tok.decode(ids, skip_special_tokens=False) == text
    chat = tok.apply_chat_template([{"role": "user", "content": "hi"}])
    assert chat == "<|bos|><|user|>hi\n<|assistant|>"


def test_hf_tokenizer_special_tokens_template_and_generation_defaults(tmp_path):
    save_tokenizer(tmp_path, 300)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 5], "temperature": 0.6,
                                                                 "top_p": 0.9, "max_new_tokens": 33}))
    tok = HFTokenizer.from_dir(tmp_path)
    assert tok.bos_token_id == 0 and tok.eos_token_ids == [1, 5]
    assert tok.generation_defaults == {"temperature": 0.6, "top_p": 0.9, "max_tokens": 33}
    assert tok.decode(tok.encode("hello world")) == "hello world"
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}]) == "<s>user\nhi</s><s>assistant\n"


def test_throughput_helper_reports_positive_rates(tmp_path):
    from bringup.runner.throughput import measure_throughput

    result = measure_throughput("cpu", profile_path=tmp_path / "none.yaml", prompt_tokens=16, new_tokens=4, reps=1)
    assert result["prefill_tokens_per_s"] > 0 and result["decode_tokens_per_s"] > 0
    assert result["plan"]["dtype"] == "float32"
