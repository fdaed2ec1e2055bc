"""`--quantization auto` off the host on a checkpoint of quantized blocks: a device kind that maps some of the file's
blocks without rounding their codes again (int4_pack from Q4_0 / Q4_1, weights/held.py) is measured with those
blocks, loaded once more from the file, not with the dequantized weights rounded again (as held_candidates.py does
for the host's kinds)."""

from __future__ import annotations

import torch

from bringup.profiles.schema import Profile
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.plan.quantize.device_scheme import device_candidates
from bringup.runner.sources.model_source import ModelSource
from bringup.runner.weights.formats.gguf_blocks import holds
from bringup.runner.weights.held import HELD_AS, MAPPED, LinearWeightTypes


def load_held_device_kinds(model: DecoderModel, source: ModelSource, config: ModelConfig, dtype: torch.dtype,
                           weights: LinearWeightTypes, profile: Profile | None) -> list[str]:
    """Store the file's blocks for each device kind auto will try that maps some of them, beside the served
    weights; the kinds stored so."""
    candidates, _, kinds = device_candidates(model.device, config, profile, dtype)
    mapped = [kinds[s] for s in candidates
              if kinds[s] in MAPPED and any(holds(HELD_AS[kinds[s]], t) for t in weights.layers)]
    for kind in mapped:
        donor = source.load(config, dtype, model.device, WeightLayout(kind, kind, 0), checked=True)
        model.adopt_kind(kind, donor)
    return mapped
