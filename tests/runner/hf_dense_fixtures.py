"""Random-initialised Qwen3, Phi-3, Gemma-2 (and windowed Mistral, Qwen2) transformers models of odd sizes, saved as
local model directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tests.runner.hf_fixtures import random_model, save_tokenizer

VOCAB = 331
# hidden 72 and 6 heads everywhere; head_dim 16 (not 72 / 6) where the family allows it
SIZES = dict(vocab_size=VOCAB, hidden_size=72, intermediate_size=104, num_hidden_layers=3, num_attention_heads=6,
             max_position_embeddings=256, bos_token_id=0, eos_token_id=1, pad_token_id=0)


def family_config(family: str, window: int | None = 8, **extra: Any) -> Any:
    """A transformers config of `family` ("qwen3", "phi3", "gemma2", and with their real window now "mistral",
    "qwen2"); `window` None: no sliding layer."""
    from transformers import Gemma2Config, MistralConfig, Phi3Config, Qwen2Config, Qwen3Config

    if family == "qwen3":  # layers 1 and 2 slide (max_window_layers 1), biases on q, k, v and o
        kw = dict(num_key_value_heads=2, head_dim=16, attention_bias=True, tie_word_embeddings=False,
                  use_sliding_window=window is not None, sliding_window=window or 4096, max_window_layers=1)
        return Qwen3Config(**SIZES, **(kw | extra))
    if family == "phi3":  # every layer slides; rope rotates half of each 12-dim head
        kw = dict(num_key_value_heads=3, sliding_window=window, tie_word_embeddings=False,
                  rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5})
        return Phi3Config(**SIZES, **(kw | extra))
    if family == "gemma2":  # layers 0 and 2 slide; both soft-caps small enough to bite
        kw = dict(num_key_value_heads=2, head_dim=16, sliding_window=window or 4096, query_pre_attn_scalar=20,
                  attn_logit_softcapping=5.0, final_logit_softcapping=3.0, tie_word_embeddings=True)
        return Gemma2Config(**SIZES, **(kw | extra))
    if family == "mistral":  # every layer slides
        return MistralConfig(**SIZES, **(dict(num_key_value_heads=2, sliding_window=window) | extra))
    if family == "qwen2":  # layers 2 on slide
        kw = dict(num_key_value_heads=3, use_sliding_window=window is not None, sliding_window=window or 4096,
                  max_window_layers=2)
        return Qwen2Config(**SIZES, **(kw | extra))
    raise ValueError(family)


def make_family_model(path: Path, family: str, window: int | None = 8, seed: int = 0, std: float = 0.15,
                      **extra: Any) -> torch.nn.Module:
    """Build, randomise (wide enough that greedy has no near-ties), save with save_pretrained (safetensors) and
    return the eager-attention transformers model."""
    config = family_config(family, window, **extra)
    model = random_model(config, seed=seed, std=std, norm_centre=0.0 if family == "gemma2" else 1.0)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    save_tokenizer(path, VOCAB)
    return model


def reload_without_window(path: Path) -> torch.nn.Module:
    """The saved model again, with a window larger than any context (what a runner that ignored it computes)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(path, sliding_window=4096, attn_implementation="eager")
    return model.eval()
