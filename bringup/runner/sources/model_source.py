"""Where a served model comes from: the built-in model, a Hugging Face style directory or a GGUF file.

Each source answers the same questions in the same order, so engine start-up and the self-test have one code path:
its settings (config), its tokenizer, its tensors checked against the settings before anything is timed (check),
their size in the plan's dtype against free memory and their values (check_weights), then the loaded decoder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import torch

from bringup.backends.registry import backend_for
from bringup.fallbacks import FallbackRecorder
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.families import hf_tensor_shapes
from bringup.runner.sources.builtin_model import BUILTIN_NAME, builtin_config, load_builtin
from bringup.runner.sources.directory.loader import check_weights, load_model, read_config, safetensors_files
from bringup.runner.sources.directory.validate import TensorSpec, check_fits, check_model_dir
from bringup.runner.sources.gguf.reader import is_gguf_path
from bringup.runner.sources.identity import builtin_sha256, directory_sha256
from bringup.runner.text.tokenizer import ByteTokenizer, HFTokenizer
from bringup.runner.weights.held import FLOAT_CHECKPOINT, LinearWeightTypes


class ModelSource(Protocol):
    name: str  # the model's name as the engine reports it

    def config(self) -> ModelConfig: ...

    def fingerprint(self) -> str:
        """sha256 of the model's identity from its files, cheaply (sources/identity.py): tune's record key."""

    def tokenizer(self, config: ModelConfig, fallbacks: FallbackRecorder | None = None) -> Any:
        """The tokenizer; a fallback taken while building it (a GGUF file without its text split) is recorded."""

    def check(self, config: ModelConfig) -> None:
        """Tensor names and shapes against `config`, before anything is timed or loaded (no value is read)."""

    def linear_weight_types(self) -> LinearWeightTypes:
        """How the checkpoint stores the linear layers' weights (a GGUF file's Q8_0 / Q4 blocks are loaded as they
        are into the int8 / int4 kinds; the plan says so)."""

    def check_weights(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                      allow_nonfinite: bool) -> None:
        """The weights' size in `dtype` against the device's free memory, then every value for NaN/Inf."""

    def load(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
             layout: WeightLayout | None = None, checked: bool = False) -> DecoderModel: ...


def model_source(model: Path | str | None) -> ModelSource:
    """The source `--model` names: nothing (the built-in model), a `.gguf` file, or a model directory."""
    if model is None:
        return BuiltinSource()
    path = Path(model)
    if is_gguf_path(path):
        from bringup.runner.sources.gguf.file_source import GGUFSource

        return GGUFSource(path)
    return DirectorySource(path)


class BuiltinSource:
    """The small deterministic model every command runs with no --model."""

    name = BUILTIN_NAME

    def config(self) -> ModelConfig:
        return builtin_config()

    def fingerprint(self) -> str:
        return builtin_sha256()

    def tokenizer(self, config: ModelConfig, fallbacks: FallbackRecorder | None = None) -> ByteTokenizer:
        return ByteTokenizer()

    def check(self, config: ModelConfig) -> None:
        return None

    def linear_weight_types(self) -> LinearWeightTypes:
        return FLOAT_CHECKPOINT

    def check_weights(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                      allow_nonfinite: bool) -> None:
        """The weights' size in `dtype` against the device's free memory (their values are drawn finite)."""
        device = torch.device(device)
        _, free = backend_for(device).memory(device.index or 0)
        specs = [TensorSpec(name, tuple(shape), "F32", Path(self.name))
                 for name, shape in hf_tensor_shapes(config).items() if shape is not None]
        check_fits(self.name, specs, dtype, free, str(device))

    def load(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
             layout: WeightLayout | None = None, checked: bool = False) -> DecoderModel:
        return load_builtin(dtype, device, layout)


class DirectorySource:
    """A local Hugging Face style directory: config.json, *.safetensors, tokenizer.json."""

    def __init__(self, model_dir: Path) -> None:
        self.model_dir = model_dir
        self.name = model_dir.resolve().name

    def config(self) -> ModelConfig:
        config = read_config(self.model_dir)
        safetensors_files(self.model_dir)  # refuse pickle-only or weightless dirs before anything else
        return config

    def fingerprint(self) -> str:
        return directory_sha256(self.model_dir)

    def tokenizer(self, config: ModelConfig, fallbacks: FallbackRecorder | None = None) -> HFTokenizer:
        return HFTokenizer.from_dir(self.model_dir, config.eos_token_ids)

    def check(self, config: ModelConfig) -> None:
        check_model_dir(self.model_dir, config, safetensors_files(self.model_dir), scan_values=False)

    def linear_weight_types(self) -> LinearWeightTypes:
        return FLOAT_CHECKPOINT

    def check_weights(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                      allow_nonfinite: bool) -> None:
        check_weights(self.model_dir, config, dtype, device, allow_nonfinite)

    def load(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
             layout: WeightLayout | None = None, checked: bool = False) -> DecoderModel:
        return load_model(self.model_dir, config, dtype, device, layout, checked=checked)
