"""Fingerprints that say what was evaluated: the text, its token ids, the tokenizer, the model's files."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tokens_sha256(tokens: list[int]) -> str:
    return hashlib.sha256(",".join(map(str, tokens)).encode("ascii")).hexdigest()


def tokenizer_sha256(tokenizer: Any) -> str:
    """Every token id's text, special tokens included: two tokenizers with one vocabulary hash alike."""
    digest = hashlib.sha256()
    for token_id in range(tokenizer.vocab_size):
        digest.update(tokenizer.decode([token_id], skip_special_tokens=False).encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def model_files_sha256(model: Path | None) -> str:
    """The model's config and its weight files' names and sizes (hashing the weights themselves would cost as much
    as reading them): enough to tell two checkpoints under one name apart. The built-in model: its name."""
    digest = hashlib.sha256()
    if model is None:
        digest.update(b"built-in")
    elif model.is_file():
        digest.update(f"{model.name}:{model.stat().st_size}".encode())
    else:
        config = model / "config.json"
        if config.is_file():
            digest.update(config.read_bytes())
        for weights in sorted(model.glob("*.safetensors")):
            digest.update(f"{weights.name}:{weights.stat().st_size}".encode())
    return digest.hexdigest()
