"""A GGUF file as a model source (sources/model_source.py): the same questions, in the same order, as a directory."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import torch

from bringup.backends.registry import backend_for
from bringup.fallbacks import FallbackRecorder
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.families import build_model
from bringup.runner.sources.directory.validate import CheckpointWords, check_fits, check_specs, check_values
from bringup.runner.sources.gguf.architectures import architecture
from bringup.runner.sources.gguf.config import read_gguf_config
from bringup.runner.sources.gguf.reader import GGUFFile, open_gguf
from bringup.runner.sources.gguf.tensor_names import by_hf_names
from bringup.runner.sources.gguf.tensors import TensorValues, tensor_specs
from bringup.runner.sources.gguf.tokenizer import gguf_tokenizer_data
from bringup.runner.sources.gguf.weight_types import linear_weight_types
from bringup.runner.sources.identity import gguf_sha256
from bringup.runner.text.tokenizer import HFTokenizer
from bringup.runner.weights.checkpoint_reader import TensorGetter
from bringup.runner.weights.held import LinearWeightTypes

WORDS = CheckpointWords(settings="the file's metadata", weights="the GGUF file", these_settings="the file's metadata")


class GGUFSource:
    """One .gguf file: settings, tokenizer and weights, memory-mapped once and read as they are needed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = path.stem

    @cached_property
    def file(self) -> GGUFFile:
        return open_gguf(self.path)

    @cached_property
    def weights(self) -> GGUFFile:
        """The file with its tensors named as tensors.py reads them (tensor_names.by_hf_names)."""
        return by_hf_names(self.file, architecture(self.file).in_layer)

    def config(self) -> ModelConfig:
        return read_gguf_config(self.file)

    def fingerprint(self) -> str:
        return gguf_sha256(self.path, self.file.tensors)

    def tokenizer(self, config: ModelConfig, fallbacks: FallbackRecorder | None = None) -> HFTokenizer:
        return HFTokenizer(gguf_tokenizer_data(self.file, fallbacks), config.eos_token_ids)

    def check(self, config: ModelConfig) -> None:
        check_specs(self.path, config, tensor_specs(self.weights), WORDS)

    def linear_weight_types(self) -> LinearWeightTypes:
        return linear_weight_types(self.file)

    def check_weights(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                      allow_nonfinite: bool) -> None:
        specs = list(tensor_specs(self.weights).values())
        device = torch.device(device)
        _, free = backend_for(device).memory(device.index or 0)
        check_fits(self.path, specs, dtype, free, str(device))
        check_values(specs, allow_nonfinite, self._values(config).nonfinite)

    def load(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
             layout: WeightLayout | None = None, checked: bool = False) -> DecoderModel:
        if not checked:
            self.check(config)
            self.check_weights(config, dtype, device, allow_nonfinite=False)
        model = build_model(config, dtype, device, layout)
        values = self._values(config)
        get = without_offset(values.get, architecture(self.file).norm_offset)
        model.load_hf_tensors(get, values.stored)  # Q8_0 / Q4 blocks re-packed for the int8 / int4 kinds
        return model

    def _values(self, config: ModelConfig) -> TensorValues:
        return TensorValues(self.weights, config, architecture(self.file).rope_permuted)


def without_offset(get: TensorGetter, offset: float) -> TensorGetter:
    """`get`, with the offset llama.cpp's converter added to every norm weight taken off again (Gemma's 1, which
    the family's OffsetRMSNorm adds back, as transformers' GGUF loader does)."""
    if not offset:
        return get

    def read(name: str) -> torch.Tensor | None:
        tensor = get(name)
        return tensor - offset if tensor is not None and name.endswith("norm.weight") else tensor

    return read
