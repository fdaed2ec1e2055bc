"""The built-in reference model's shape (builtin.py builds its weights): plain data, no torch, so a profile's
plan can be drafted where torch is not installed (`bringup report`, `bringup profile diff`)."""

from __future__ import annotations

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.tokenizer import ByteTokenizer

BUILTIN_NAME = "bringup-builtin-llama-2.5m"


def builtin_config() -> ModelConfig:
    tok = ByteTokenizer()
    return ModelConfig(
        architecture="LlamaForCausalLM", vocab_size=tok.vocab_size, hidden_size=256, intermediate_size=512,
        num_layers=4, num_heads=8, num_kv_heads=4, head_dim=32, max_position_embeddings=1024,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        bos_token_id=tok.bos_token_id, eos_token_ids=list(tok.eos_token_ids),
    )
