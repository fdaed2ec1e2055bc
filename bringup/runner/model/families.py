"""Which decoder family serves each supported Hugging Face architecture."""

from __future__ import annotations

import torch

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.llama import LlamaDecoder
from bringup.runner.model.qwen2 import Qwen2Decoder

FAMILIES: dict[str, type[DecoderModel]] = {arch: family for family in (LlamaDecoder, Qwen2Decoder)
                                           for arch in family.architectures}


def build_model(config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                layout: WeightLayout | None = None) -> DecoderModel:
    """The family's decoder for `config`, empty until `load_hf_tensors`."""
    return FAMILIES[config.architecture](config, dtype, device, layout)
