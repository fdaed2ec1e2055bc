"""Fingerprints that say what was evaluated: the text, its token ids, the tokenizer (the model's files:
runner/sources/identity.py)."""

from __future__ import annotations

import hashlib
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
