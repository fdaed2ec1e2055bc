"""Random-initialised transformers models + a tokenizer.json, saved as a local model directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

CORPUS = ["the quick brown fox jumps over the lazy dog", "hello world, bringing up accelerators",
          "paged attention with block tables", "continuous batching schedules tokens"] * 4


def save_tokenizer(path: Path, vocab_size: int) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, trainer)
    tok.save(str(path / "tokenizer.json"))
    template = "{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>{% endfor %}" \
               "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
    (path / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": template}))


def make_hf_model(path: Path, arch: str = "llama", *, rope_llama3: bool = False, tied: bool = False,
                  seed: int = 0, hidden: int = 64, layers: int = 2, heads: int = 4, kv_heads: int = 2,
                  intermediate: int = 128, vocab: int = 320, std: float = 0.15,
                  max_shard_size: str | None = None) -> torch.nn.Module:
    """Build, randomise (wide enough init that greedy has no near-ties) and save a model directory."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    kw = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=layers,
              num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=256,
              tie_word_embeddings=tied, bos_token_id=0, eos_token_id=1)
    if arch == "llama":
        if rope_llama3:
            kw["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
        config, cls = LlamaConfig(**kw), LlamaForCausalLM
    else:
        config, cls = Qwen2Config(**kw), Qwen2ForCausalLM
    model = random_model(config, cls, seed, std)
    path.mkdir(parents=True, exist_ok=True)
    extra = {} if max_shard_size is None else {"max_shard_size": max_shard_size}
    model.save_pretrained(path, safe_serialization=True, **extra)
    save_tokenizer(path, vocab)
    return model


def random_model(config: Any, cls: type | None = None, seed: int = 0, std: float = 0.15,
                 norm_centre: float = 1.0) -> torch.nn.Module:
    """An eager-attention transformers model of `config` with weights drawn wide enough that greedy decoding and
    routing have no near-ties; norm weights around `norm_centre` (0 for Gemma, whose norms scale by 1 + w)."""
    from transformers import AutoModelForCausalLM

    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = (cls(config) if cls is not None else AutoModelForCausalLM.from_config(config)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(norm_centre + 0.1 * torch.randn_like(p))
            else:
                p.normal_(0.0, std)
    return model


def with_nan_weight(path: Path, tensor: str = "model.layers.1.mlp.down_proj.weight") -> Path:
    """The model directory `path` with one value of `tensor` set to NaN (loadable with --force)."""
    from safetensors.torch import load_file, save_file

    weights = path / "model.safetensors"
    tensors = load_file(str(weights))
    tensors[tensor][0, 0] = float("nan")
    save_file(tensors, str(weights), metadata={"format": "pt"})
    return path
