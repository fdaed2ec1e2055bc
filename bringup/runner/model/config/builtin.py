"""The built-in reference model's shape (builtin.py builds its weights): plain data, no torch, so a profile's
plan can be drafted where torch is not installed (`bringup report`, `bringup profile diff`)."""

from __future__ import annotations

from bringup.runner.model.config import ModelConfig

BUILTIN_NAME = "bringup-builtin-llama-2.5m"
# the built-in byte tokenizer's vocabulary: these special tokens (ids 0-7), then the 256 bytes
BYTE_SPECIALS = ("<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|pad|>", "<|r6|>", "<|r7|>")
BYTE_BOS_ID, BYTE_EOS_IDS = 0, (1,)


def builtin_config() -> ModelConfig:
    return ModelConfig(
        architecture="LlamaForCausalLM", vocab_size=len(BYTE_SPECIALS) + 256, hidden_size=256, intermediate_size=512,
        num_layers=4, num_heads=8, num_kv_heads=4, head_dim=32, max_position_embeddings=1024,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
        bos_token_id=BYTE_BOS_ID, eos_token_ids=list(BYTE_EOS_IDS),
    )
