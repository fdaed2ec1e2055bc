"""What the start-up steps share: the start's inputs (fixed) and the bench (the model and what was measured on it so
far, filled in by the steps in their order)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from bringup.fallbacks import FallbackRecorder
from bringup.profiles.schema import Profile
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.options import EngineOptions
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.plan import Choice, ExecutionPlan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sources.model_source import ModelSource
from bringup.runner.weights.held import LinearWeightTypes


@dataclass(frozen=True)
class StartInputs:
    """What a start is given: the options, the model's source (checked), the device, and what the fallbacks go to.
    `fell_back`: the global fallback that brought the start to this device; `withdrawn`: the quantization row of a
    first pass whose auto-chosen scheme lost to the unquantized plan."""

    options: EngineOptions
    source: ModelSource
    device: torch.device
    info: Any  # the backend's DeviceInfo for `device`
    config: ModelConfig
    tokenizer: Any
    recorder: FallbackRecorder
    fell_back: Choice | None = None
    withdrawn: Choice | None = None
    placement: Choice | None = None  # the plan's placement row when --device named several devices

    @property
    def seqs_requested(self) -> bool:
        return self.options.max_num_seqs is not None


@dataclass
class Bench:
    """What the steps found or made so far, in the order they fill it in."""

    profile: Profile | None = None  # derive
    facts: ProfileFacts = field(default_factory=lambda: ProfileFacts(None))
    quantization: str = "none"  # the --quantization, checked
    asked: str = ""  # the plan dtype before float32 activations were chosen for a scheme
    dtype: torch.dtype = torch.float32
    fingerprint: str = ""  # measure_or_replay
    key: str = ""
    record: ModelPlanRecord | None = None
    measured: StartupMeasurements | None = None
    given: StartupMeasurements | None = None  # timings given as data or by the record
    layout: WeightLayout | None = None  # choose_weights
    weights: LinearWeightTypes | None = None
    model: DecoderModel | None = None  # load
    free: int | None = None  # free device memory after the weights
    executor: Executor | None = None
    draft: ExecutionPlan | None = None  # confirm: the plan before its confirmation
    draft_layout: WeightLayout | None = None
    timings: DecodeTimings | None = None
    withdrawn: Choice | None = None  # versus_unquantized: auto's choice withdrawn (a second pass serves none)


@dataclass
class Start:
    inputs: StartInputs
    bench: Bench = field(default_factory=Bench)
