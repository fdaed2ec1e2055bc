"""`--quantization auto` on a checkpoint of quantized blocks (a GGUF file's Q8_0 / Q4): a candidate scheme that stores
some of them as they are is measured with the file's blocks, re-packed, not with the dequantized weights rounded
again. They are loaded once more from the file for that scheme and kept beside the served weights until auto decides
(startup frees them when it keeps another)."""

from __future__ import annotations

import torch

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.plan.quantize.held_blocks import auto_candidates_for, held_schemes
from bringup.runner.sources.model_source import ModelSource
from bringup.runner.weights.held import LinearWeightTypes


def load_held_candidates(model: DecoderModel, source: ModelSource, config: ModelConfig, dtype: torch.dtype,
                         weights: LinearWeightTypes, candidates: list[str]) -> list[str]:
    """Store the file's blocks for each of `candidates` (auto's, by kernel) that auto will try and that holds some
    of them as they are, beside the served weights; the schemes stored so."""
    schemes = held_schemes(auto_candidates_for(candidates, [], weights), weights)
    for scheme in schemes:
        donor = source.load(config, dtype, model.device, WeightLayout(scheme, scheme, 0), checked=True)
        model.adopt_kind(scheme, donor)
    return schemes
