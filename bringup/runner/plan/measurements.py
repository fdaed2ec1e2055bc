"""What the engine measures on the device at start-up, before it freezes the plan.

The plan is a function of the profile and these measurements. Tests and replays give them as data
(`EngineOptions.measurements`), so planning logic is checked on stated numbers, not on whatever the
machine running the test happens to measure.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bringup.backends.registry import backend_for
from bringup.runner.model.config import ModelConfig
from bringup.runner.plan.attention_timings import AttentionTimings
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.host_kernels import paged_decode_verdict, panels_why_not
from bringup.runner.plan.layout import LayoutTimings, measure_layouts
from bringup.runner.plan.mixed_steps import MixedTimings
from bringup.runner.plan.prefill_chunk import PrefillTimings
from bringup.runner.plan.prompt_layers import PromptTimings
from bringup.runner.plan.quantize.activations import Comparison
from bringup.runner.weights.kinds import PACKED, PANELS
from bringup.runner.weights.registry import packed_check


@dataclass(frozen=True)
class StartupMeasurements:
    layouts: LayoutTimings
    paged_decode: tuple[bool, str]  # use the paged decode kernel for decode steps, and the evidence either way
    free_bytes: int | None  # free device memory before the weights are loaded (None: the backend cannot say)
    decode: DecodeTimings | None = None  # decode steps of the served model (timed after loading unless given)
    fused_decode: bool = False  # try the fused decode layers (checked on the model after loading, then timed)
    unquantized: Comparison | None = None  # a requested scheme's decode steps against the unquantized plan's (data)
    # (replayed, eager, noise): seconds per decode step at batch 1 with graphs and without (timed unless given)
    graph_decode: tuple[float, float, float] | None = None
    prefill: PrefillTimings | None = None  # prefill and decode steps for the prefill chunk (None: prompts run whole)
    attention: AttentionTimings | None = None  # the start-up attention check's numbers (None: not run)
    # a prompt through the fused prompt layers and through the modules (timed unless given; given as data without
    # it, the fused prompt layers are not tried)
    prompt: PromptTimings | None = None
    # a step past the fused decode layers' rows as one forward and as two (timed unless given; given as data without
    # it, steps run as one forward)
    mixed: MixedTimings | None = None


def measure(device: torch.device, dtype: torch.dtype, config: ModelConfig) -> StartupMeasurements:
    _, free = backend_for(device).memory(device.index or 0)
    return StartupMeasurements(
        layouts=measure_layouts(dtype, device, config, free, {PACKED: packed_check(device, dtype),
                                                              PANELS: panels_why_not(device, dtype, config)}),
        paged_decode=paged_decode_verdict(device, dtype, config.num_heads, config.num_kv_heads, config.head_dim),
        free_bytes=free,
        fused_decode=True,
    )
