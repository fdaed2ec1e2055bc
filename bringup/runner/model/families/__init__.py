"""Which decoder family serves each supported Hugging Face architecture."""

from __future__ import annotations

import torch

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.families.gemma2 import Gemma2Decoder
from bringup.runner.model.families.gemma3 import Gemma3Decoder
from bringup.runner.model.families.llama import LlamaDecoder
from bringup.runner.model.families.mixtral import MixtralDecoder
from bringup.runner.model.families.phi3 import Phi3Decoder
from bringup.runner.model.families.qwen2 import Qwen2Decoder
from bringup.runner.model.families.qwen3 import Qwen3Decoder
from bringup.runner.model.families.qwen3_moe import Qwen3MoeDecoder

FAMILIES: dict[str, type[DecoderModel]] = {arch: family for family in (LlamaDecoder, Qwen2Decoder, Qwen3Decoder,
                                                                       Phi3Decoder, Gemma2Decoder, Gemma3Decoder,
                                                                       MixtralDecoder, Qwen3MoeDecoder)
                                           for arch in family.architectures}
SUPPORTED_ARCHITECTURES = tuple(FAMILIES)
MODEL_TYPES = {model_type: arch for family in dict.fromkeys(FAMILIES.values())
               for model_type, arch in family.model_types.items()}  # for a config.json that names no architecture


def build_model(config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                layout: WeightLayout | None = None) -> DecoderModel:
    """The family's decoder for `config`, empty until `load_hf_tensors`."""
    return FAMILIES[config.architecture](config, dtype, device, layout)


def hf_tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the family of `config` reads, by Hugging Face name, with its shape (validate.py checks them)."""
    return FAMILIES[config.architecture].hf_tensor_shapes(config)
