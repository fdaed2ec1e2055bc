"""Load a local Hugging Face style model directory: config.json + safetensors (never pickle)."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch
from safetensors import safe_open

from bringup.errors import BringupError
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.families import build_model
from bringup.runner.model.hf_config import read_hf_config
from bringup.runner.model.validate import check_model_dir

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")


def read_config(model_dir: Path) -> ModelConfig:
    if not model_dir.exists():
        raise BringupError(f"model directory {model_dir} does not exist; pass --model DIR with config.json, "
                           "*.safetensors and tokenizer.json (or omit --model for the built-in model)")
    if not model_dir.is_dir():
        raise BringupError(f"--model {model_dir} is a file; pass the directory that holds config.json")
    path = model_dir / "config.json"
    if not path.is_file():
        raise BringupError(f"{path} is missing; a Hugging Face style model directory needs config.json")
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise BringupError(f"{path} is not valid JSON ({exc}); re-download or fix the file") from None
    return read_hf_config(cfg, source=str(path))


def safetensors_files(model_dir: Path) -> list[Path]:
    """The weight files: from the shard index when present, else every *.safetensors file."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, json.JSONDecodeError, KeyError, TypeError) as exc:
            raise BringupError(f"{index} is malformed ({type(exc).__name__}: {exc}); it needs a 'weight_map' "
                               "object") from None
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise BringupError(f"{index}: 'weight_map' must map tensor names to shard file names; re-save the "
                               "model with save_pretrained")
        files = [model_dir / name for name in sorted(set(weight_map.values()))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            raise BringupError(f"{index} names shard(s) that are missing: {', '.join(missing)}; "
                               "download the complete model")
        return files
    files = sorted(model_dir.glob("*.safetensors"))
    if files:
        return files
    pickles = sorted(p.name for p in model_dir.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise BringupError(
            f"{model_dir} has only pickle weights ({', '.join(pickles[:3])}); bringup loads safetensors only "
            "because unpickling can run arbitrary code. Convert them, e.g. load with transformers and "
            "save_pretrained(dir, safe_serialization=True)")
    raise BringupError(f"{model_dir} has no *.safetensors weight files")


def load_model(model_dir: Path, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
               layout: WeightLayout | None = None, allow_nonfinite: bool = False,
               checked: bool = False) -> DecoderModel:
    """Check the directory's safetensors files completely (validate.py; skipped when the caller already did,
    `checked`), then build the decoder and fill it."""
    files = safetensors_files(model_dir)
    if not checked:
        check_model_dir(model_dir, config, files, allow_nonfinite)
    model = build_model(config, dtype, device, layout)
    with ExitStack() as stack:
        handles = [stack.enter_context(safe_open(str(f), framework="pt")) for f in files]
        where = {name: h for h in handles for name in h.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        try:
            model.load_hf_tensors(_getter(where))
        except KeyError as exc:
            raise BringupError(f"{model_dir}: weight {exc.args[0]!r} is missing from the safetensors files; "
                               "the checkpoint does not match config.json") from None
    return model


def _getter(where: dict) -> Callable[[str], torch.Tensor | None]:
    def get(name: str) -> torch.Tensor | None:
        handle = where.get(name)
        return None if handle is None else handle.get_tensor(name)

    return get
