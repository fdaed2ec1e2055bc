"""Random-initialised transformers MoE models (Mixtral, Qwen3-MoE) of odd sizes, saved as model directories."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from tests.runner.hf_fixtures import random_model, save_tokenizer

VOCAB = 331
SIZES = dict(vocab_size=VOCAB, hidden_size=72, num_hidden_layers=3, num_attention_heads=6, num_key_value_heads=2,
             max_position_embeddings=256, bos_token_id=0, eos_token_id=1, num_experts_per_tok=2,
             tie_word_embeddings=False)
EXPERTS, EXPERT_INTERMEDIATE, DENSE_INTERMEDIATE = 5, 40, 56


def mixtral_config(**overrides: Any) -> Any:
    from transformers import MixtralConfig

    return MixtralConfig(**{**SIZES, "num_local_experts": EXPERTS, "intermediate_size": EXPERT_INTERMEDIATE,
                            **overrides})


def qwen3_moe_config(**overrides: Any) -> Any:
    """Layers 0 and 2 dense, layer 1 sparse (decoder_sparse_step 2), head_dim 16 (not hidden / heads), unless
    overridden."""
    from transformers import Qwen3MoeConfig

    return Qwen3MoeConfig(**{**SIZES, "num_experts": EXPERTS, "moe_intermediate_size": EXPERT_INTERMEDIATE,
                             "intermediate_size": DENSE_INTERMEDIATE, "decoder_sparse_step": 2, "head_dim": 16,
                             **overrides})


def make_hf_moe_model(path: Path, config: Any, seed: int = 0, std: float = 0.15,
                      zero_router_layers: tuple[int, ...] = ()) -> torch.nn.Module:
    """Build, randomise (wide enough that greedy and routing have no near-ties) and save a model directory.
    The routers of `zero_router_layers` are all zeros: every expert ties for every token."""
    model = random_model(config, seed=seed, std=std)
    with torch.no_grad():
        for i in zero_router_layers:
            model.model.layers[i].mlp.gate.weight.zero_()
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path, safe_serialization=True)
    save_tokenizer(path, VOCAB)
    return model


def ops_profile(ops: tuple[str, ...], dtype: str = "float32", failing: tuple[str, ...] = ()) -> Any:
    """A profile holding only verify-ops records: one passing case per op in `ops`, one failing per `failing`."""
    from bringup.profiles.schema import Profile
    from bringup.profiles.sections.ops import OpCaseRecord

    records = [OpCaseRecord(op=op, dtype=dtype, case="stated", status="pass") for op in ops]
    records += [OpCaseRecord(op=op, dtype=dtype, case="stated", status="fail", message="wrong numbers")
                for op in failing]
    return Profile(ops=records)


def write_profile(path: Path, profile: Any) -> Path:
    from bringup.profiles.store import render_yaml, write_atomically

    write_atomically(path, render_yaml(profile))
    return path
