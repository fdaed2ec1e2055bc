"""What the caller asks of an engine at start: the model, the profile, the device and the limits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bringup.runner.plan.measurements import StartupMeasurements


@dataclass
class EngineOptions:
    model_dir: Path | None = None  # a model directory or a .gguf file; None = the built-in reference model
    profile_path: Path | None = None
    device: str | None = None
    strict: bool = False
    allow_cpu_fallback: bool = False
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    weight_layout: str | None = None  # "in_out" | "out_in" to override the measured choice (benchmarks)
    measurements: StartupMeasurements | None = None  # given as data (tests, replays) instead of timed here
    dtype: str | None = None  # None or "auto": the plan's choice; else a dtype name (--dtype)
    quantization: str = "none"  # none | int8 | int4 | fp8 | auto: quantized linear layers (quantize/scheme.py)
    force: bool = False  # run a --dtype the profile marks broken, and load weights holding NaN/Inf
    use_record: bool = True  # replay the plan `bringup tune` recorded for this model, if any (tune itself: False)
    on_measured: Callable[[StartupMeasurements], None] | None = None  # given what start-up timed (tune collects it)
    chat_template: Path | None = None  # a Jinja file rendering chats in place of the model's template (--chat-template)
