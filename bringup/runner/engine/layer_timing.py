"""A device's measured time per decoder layer, for the placement planner's cost model (plan/placement/cost.py).

A decode step on a slow device is not only its weights over its bandwidth: every op pays a dispatch (and, on the
emulator, the pacing of that dispatch), and a small model's layers are mostly such ops. So the layer itself is timed:
the model's own decoder, cut to a few layers with a small vocabulary and random weights, runs decode steps through
the executor on the device, once with FEW layers and once with MANY, in turn; the difference of the two floors over
the layers between them is one layer's time (the step's own fixed costs, embedding and head cancel out). What that
time holds beyond the layer's bytes over the measured bandwidth is the per-layer term the planner adds."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import torch

from bringup.backends.registry import synchronize
from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.model.families import build_model, hf_tensor_shapes
from bringup.runner.plan.plan import build_plan
from bringup.runner.plan.profile_facts import ProfileFacts

FEW, MANY = 3, 6  # layers in the two timed models: each past a host cache (32 MiB L3 here) of a small model's layers
VOCAB = 256  # the timed models' vocabulary: enough for a step, too small for the head to matter
CONTEXT = 64  # tokens of cache each timed model holds
PROMPT = 8  # context the timed steps start from
ROUNDS = 4  # each model timed this many times, in turn with the other
STEPS = 6  # decode steps per round (after one untimed step)


@dataclass(frozen=True)
class LayerTime:
    seconds: float  # one decoder layer's decode step at batch 1, its floor
    evidence: str


def layer_seconds(device: str, config: ModelConfig, dtype: str, facts: ProfileFacts | None = None) -> LayerTime:
    """One layer of `config` in `dtype` timed on `device` (a few seconds at most on a slow device), planned from
    the device's profile `facts` (None: the conservative plan, with its warning)."""
    facts = facts or ProfileFacts(None)
    steps = {count: _Stepper(_model(config, count, dtype, device, facts)) for count in (FEW, MANY)}
    best = {count: float("inf") for count in steps}
    for _ in range(ROUNDS):
        for count, stepper in steps.items():
            best[count] = min(best[count], stepper.floor())
    seconds = max(best[MANY] - best[FEW], 0.0) / (MANY - FEW)
    evidence = (f"a layer timed at {seconds * 1e3:.3g} ms (decode steps of {FEW}- and {MANY}-layer cuts of the "
                f"model on {device}, {dtype}, floors {best[FEW] * 1e3:.3g} and {best[MANY] * 1e3:.3g} ms)")
    return LayerTime(seconds, evidence)


def _cut(config: ModelConfig, layers: int) -> ModelConfig:
    """`config` with its first `layers` layers (per-layer lists cut to match) and a small vocabulary."""
    changes = {f.name: getattr(config, f.name)[:layers] for f in dataclasses.fields(config)
               if isinstance(getattr(config, f.name), list) and len(getattr(config, f.name)) == config.num_layers}
    return dataclasses.replace(config, num_layers=layers, vocab_size=VOCAB, stored_quantization=None, **changes)


def _model(config: ModelConfig, layers: int, dtype: str, device: str, facts: ProfileFacts) -> Executor:
    cut = _cut(config, layers)
    generator = torch.Generator().manual_seed(0)
    shapes = hf_tensor_shapes(cut)
    model = build_model(cut, getattr(torch, dtype), device, WeightLayout("out_in", "out_in", 0))
    model.load_hf_tensors(lambda name: None if shapes.get(name) is None
                          else 0.02 * torch.randn(shapes[name], generator=generator))
    plan = build_plan(facts, "layer timing", device, cut, 1, CONTEXT, dtype)
    model.allocate_kv_cache(CONTEXT // plan.block_size, plan.block_size)
    return Executor(model, plan, FallbackRecorder())


class _Stepper:
    """Decode steps at batch 1 from a PROMPT-token context, restarted (over the same cache) every round."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.table = list(range(CONTEXT // executor.plan.block_size))

    def floor(self) -> float:
        ids = list(range(1, PROMPT + 1))
        self.executor.run_chunks([SeqChunk(ids, 0, self.table)])
        best = float("inf")
        for step in range(STEPS + 1):
            ids.append(step + 1)
            began = time.perf_counter()
            self.executor.run_chunks([SeqChunk(list(ids), len(ids) - 1, self.table)])
            synchronize(self.executor.model.device)
            if step:
                best = min(best, time.perf_counter() - began)
        return best
