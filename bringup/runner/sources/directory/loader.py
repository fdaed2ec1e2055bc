"""Load a local Hugging Face style model directory: config.json + safetensors (never pickle)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import torch
from safetensors import safe_open

from bringup.backends.registry import backend_for
from bringup.errors import BringupError
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.families import build_model
from bringup.runner.model_files import has_entry, model_file, read_json
from bringup.runner.sources.directory.hf_config import read_hf_config
from bringup.runner.sources.directory.validate import check_fits, check_model_dir, check_values
from bringup.runner.weights.formats.compressed_tensors.quantization_config import WHAT_USE, read_quantization_config
from bringup.terminal_text import shown

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl")
SHARD_INDEX = "model.safetensors.index.json"


def read_config(model_dir: Path) -> ModelConfig:
    if not model_dir.exists():
        raise BringupError(f"model directory {model_dir} does not exist; pass --model DIR with config.json, "
                           "*.safetensors and tokenizer.json, or --model FILE.gguf (or omit --model for the built-in "
                           "model)")
    if not model_dir.is_dir():
        raise BringupError(f"--model {model_dir} is a file; pass the directory that holds config.json, or a GGUF "
                           "file (its name ending in .gguf)")
    if not has_entry(model_dir, "config.json"):
        raise BringupError(f"{model_dir / 'config.json'} is missing; a Hugging Face style model directory needs "
                           "config.json")
    raw = read_json(model_dir, "config.json")
    config = read_hf_config(raw, source=str(model_dir / "config.json"))
    stored = read_quantization_config(raw, model_dir)
    if stored is not None and config.moe is not None:
        raise BringupError(f"{model_dir}: quantization_config {stored.describe()} on a mixture-of-experts model is "
                           f"not loaded by bringup (its experts are served unquantized); {WHAT_USE}")
    config.stored_quantization = stored
    return config


def safetensors_files(model_dir: Path) -> list[Path]:
    """The weight files (their real paths, each checked by model_files): from the shard index when present, else
    every *.safetensors file."""
    if has_entry(model_dir, SHARD_INDEX):
        return [model_file(model_dir, name) for name in _shard_names(model_dir)]
    files = [model_file(model_dir, p.name) for p in sorted(model_dir.glob("*.safetensors"))]
    if files:
        return files
    pickles = sorted(p.name for p in model_dir.iterdir() if p.suffix in PICKLE_SUFFIXES)
    if pickles:
        raise BringupError(
            f"{model_dir} has only pickle weights ({shown(', '.join(pickles[:3]))}); bringup loads safetensors only "
            "because unpickling can run arbitrary code. Convert them, e.g. load with transformers and "
            "save_pretrained(dir, safe_serialization=True)")
    raise BringupError(f"{model_dir} has no *.safetensors weight files")


def _shard_names(model_dir: Path) -> list[str]:
    """The shard files the index names (not yet checked: model_file does that)."""
    index = model_dir / SHARD_INDEX
    try:
        weight_map = read_json(model_dir, SHARD_INDEX)["weight_map"]
    except (KeyError, TypeError) as exc:
        raise BringupError(f"{index} is malformed ({type(exc).__name__}: {shown(exc)}); it needs a 'weight_map' "
                           "object") from None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise BringupError(f"{index}: 'weight_map' must map tensor names to shard file names; re-save the "
                           "model with save_pretrained")
    names = sorted(set(weight_map.values()))
    missing = [name for name in names if not has_entry(model_dir, name)]
    if missing:
        more = f" (and {len(missing) - 3} more)" if len(missing) > 3 else ""
        raise BringupError(f"{index} names shard(s) that are missing: {', '.join(map(_bounded, missing[:3]))}{more}; "
                           "download the complete model")
    return names


def _bounded(name: str) -> str:
    return shown(name if len(name) <= 80 else name[:77] + "...")


def check_weights(model_dir: Path, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                  allow_nonfinite: bool = False) -> None:
    """Before any weight is read: the tensors (headers, names, shapes) checked, their size held in `dtype`
    checked against the device's free memory, then every value checked for NaN/Inf."""
    specs = check_model_dir(model_dir, config, safetensors_files(model_dir), scan_values=False)
    device = torch.device(device)
    _, free = backend_for(device).memory(device.index or 0)
    check_fits(model_dir, specs, dtype, free, str(device))
    check_values(specs, allow_nonfinite)


def load_model(model_dir: Path, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
               layout: WeightLayout | None = None, allow_nonfinite: bool = False,
               checked: bool = False) -> DecoderModel:
    """Check the directory's safetensors files completely and against free memory (check_weights; skipped when
    the caller already did, `checked`), then build the decoder and fill it."""
    if not checked:
        check_weights(model_dir, config, dtype, device, allow_nonfinite)
    files = safetensors_files(model_dir)
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
