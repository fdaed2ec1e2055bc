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
CONTEXT = 256  # tokens of cache each timed sequence holds (a timed prefill is cut to it)
PROMPT = 8  # context the timed decode steps start from
ROUNDS = 4  # each model timed this many times, in turn with the other
STEPS = 6  # decode steps per round (after one untimed step)
PREFILLS = 1  # timed prefills per round


@dataclass(frozen=True)
class Work:
    """What one timed step runs: `batch` sequences, each `tokens` new tokens (1: a decode step from PROMPT tokens of
    context; more: a prefill of that many tokens from position 0)."""
    batch: int
    tokens: int


DECODE = Work(1, 1)


@dataclass(frozen=True)
class LayerTime:
    seconds: float  # one decoder layer's decode step at batch 1, its floor
    evidence: str


@dataclass(frozen=True)
class CutFloors:
    """Each work's floor on the FEW- and the MANY-layer cut."""
    few: dict[Work, float]
    many: dict[Work, float]

    def layer_s(self, work: Work) -> float:
        return max(self.many[work] - self.few[work], 0.0) / (MANY - FEW)

    def fixed_s(self, work: Work) -> float:
        """The step's time beyond its layers (embedding, the small head, the step's own costs)."""
        return max(self.few[work] - FEW * self.layer_s(work), 0.0)


class CutTimer:
    """The FEW- and MANY-layer cuts of `config` in `dtype` on `device`, planned from the device's profile `facts`
    (None: the conservative plan, with its warning), with a cache for the largest batch of `works`; each round times
    every work on each cut, in turn, and keeps the floors."""

    def __init__(self, device: str, config: ModelConfig, dtype: str, facts: ProfileFacts | None,
                 works: tuple[Work, ...]) -> None:
        facts = facts or ProfileFacts(None)
        batch = max(work.batch for work in works)
        self.works = works
        self.steps = {count: _Stepper(_model(config, count, dtype, device, facts, batch)) for count in (FEW, MANY)}
        self.best: dict[int, dict[Work, float]] = {FEW: {}, MANY: {}}

    def round(self) -> None:
        for count, stepper in self.steps.items():
            for work in self.works:
                self.best[count][work] = min(self.best[count].get(work, float("inf")), stepper.floor(work))

    def floors(self) -> CutFloors:
        return CutFloors(self.best[FEW], self.best[MANY])


def interleaved(timers: list[CutTimer]) -> list[CutFloors]:
    """Each timer's rounds in turn with the others' (so a load that comes and goes falls on every device alike)."""
    for _ in range(ROUNDS):
        for timer in timers:
            timer.round()
    return [timer.floors() for timer in timers]


def layer_seconds(device: str, config: ModelConfig, dtype: str, facts: ProfileFacts | None = None) -> LayerTime:
    """One layer of `config` in `dtype` timed on `device` (a few seconds at most on a slow device)."""
    return layer_time(interleaved([CutTimer(device, config, dtype, facts, (DECODE,))])[0], device, dtype)


def layer_time(floors: CutFloors, device: str, dtype: str) -> LayerTime:
    seconds = floors.layer_s(DECODE)
    evidence = (f"a layer timed at {seconds * 1e3:.3g} ms (decode steps of {FEW}- and {MANY}-layer cuts of the "
                f"model on {device}, {dtype}, floors {floors.few[DECODE] * 1e3:.3g} and "
                f"{floors.many[DECODE] * 1e3:.3g} ms)")
    return LayerTime(seconds, evidence)


def _cut(config: ModelConfig, layers: int) -> ModelConfig:
    """`config` with its first `layers` layers (per-layer lists cut to match) and a small vocabulary."""
    changes = {f.name: getattr(config, f.name)[:layers] for f in dataclasses.fields(config)
               if isinstance(getattr(config, f.name), list) and len(getattr(config, f.name)) == config.num_layers}
    return dataclasses.replace(config, num_layers=layers, vocab_size=VOCAB, stored_quantization=None, **changes)


def _model(config: ModelConfig, layers: int, dtype: str, device: str, facts: ProfileFacts, batch: int) -> Executor:
    cut = _cut(config, layers)
    generator = torch.Generator().manual_seed(0)
    shapes = hf_tensor_shapes(cut)
    model = build_model(cut, getattr(torch, dtype), device, WeightLayout("out_in", "out_in", 0))
    model.load_hf_tensors(lambda name: None if shapes.get(name) is None
                          else 0.02 * torch.randn(shapes[name], generator=generator))
    plan = build_plan(facts, "layer timing", device, cut, batch, CONTEXT, dtype)
    model.allocate_kv_cache(batch * CONTEXT // plan.block_size, plan.block_size)
    return Executor(model, plan, FallbackRecorder())


class _Stepper:
    """Timed steps over the same cache, restarted every round: decode steps of a batch, each sequence from a
    PROMPT-token context, or prefills of one sequence."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.per_sequence = CONTEXT // executor.plan.block_size

    def floor(self, work: Work) -> float:
        tables = [list(range(i * self.per_sequence, (i + 1) * self.per_sequence)) for i in range(work.batch)]
        if work.tokens > 1:
            prompt = [1 + t % (VOCAB - 1) for t in range(work.tokens)]
            return min(self._timed([SeqChunk(prompt, 0, tables[0])]) for _ in range(PREFILLS))
        ids = [list(range(1 + i, PROMPT + 1 + i)) for i in range(work.batch)]
        self.executor.run_chunks([SeqChunk(seq, 0, table) for seq, table in zip(ids, tables)])
        best = float("inf")
        for step in range(STEPS + 1):
            for seq in ids:
                seq.append(step + 1)
            took = self._timed([SeqChunk(list(seq), len(seq) - 1, table) for seq, table in zip(ids, tables)])
            best = min(best, took) if step else best
        return best

    def _timed(self, chunks: list[SeqChunk]) -> float:
        began = time.perf_counter()
        self.executor.run_chunks(chunks)
        synchronize(self.executor.model.device)
        return time.perf_counter() - began
