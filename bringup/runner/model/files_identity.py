"""A model's identity from its files, without reading its weights: what eval keys and tune's records use."""

from __future__ import annotations

import hashlib
from pathlib import Path


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
