"""The executor's decode graphs: a captured StaticStep per (batch bucket, context bucket), replayed for every decode
step they hold; a replay or capture that fails at run time is a path fallback to eager (WARNING, counted, an error
under --strict), and the steps run eager from then on."""

from __future__ import annotations

from collections.abc import Callable

import torch

from bringup.errors import StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.graphs.buckets import bucket_for
from bringup.runner.engine.graphs.replay_check import step_difference
from bringup.runner.engine.graphs.static_step import StaticStep
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import DecoderModel
from bringup.runner.plan.graphs import replay_check

# capture(step) -> replay: the device family's capture (Backend.capture_graph), which warms the step up first
Capture = Callable[[Callable[[], None]], Callable[[], None]]


class DecodeGraphs:
    """Captured decode steps by (batch bucket, context bucket); `logits` serves a decode step from them."""

    def __init__(self, model: DecoderModel, block_size: int, batches: list[int], contexts: list[int],
                 capture: Capture, recorder: FallbackRecorder) -> None:
        self.model, self.block_size, self.batches, self.contexts = model, block_size, batches, contexts
        self.capture, self.recorder = capture, recorder
        self.steps: dict[tuple[int, int], StaticStep] = {}
        self.replays = 0
        self.failed: str | None = None  # why the steps run eager since a run-time fault (None: they replay)

    def captured(self, batch: int, capacity: int, chunks: list[SeqChunk] | None = None) -> StaticStep:
        """The step for (batch, capacity), captured now if it is not yet; its inputs `chunks` (the step about to
        run: the warm-up runs write the same K/V the replay will), or a scratch context in block 0 at start-up."""
        key = (batch, capacity)
        if key not in self.steps:
            step = StaticStep(self.model, batch, capacity, self.block_size)
            if chunks is None:
                step.fill_scratch([0])
            else:
                step.fill(chunks)
            step.replay = self.capture(step.forward)
            if chunks is not None:
                wrong = replay_check(step_difference(step, chunks))
                if wrong is not None:
                    raise RuntimeError(wrong)
            self.steps[key] = step
        return self.steps[key]

    def logits(self, chunks: list[SeqChunk]) -> torch.Tensor | None:
        """Logits [len(chunks), vocab] of a decode step replayed, or None when no graph serves it: a step with a
        prompt, more sequences than the largest bucket, a context past the largest, or graphs off after a fault."""
        if self.failed is not None or any(len(chunk.token_ids) - chunk.start != 1 for chunk in chunks):
            return None
        batch = bucket_for(self.batches, len(chunks))
        capacity = bucket_for(self.contexts, max(len(chunk.token_ids) for chunk in chunks))
        if batch is None or capacity is None:
            return None
        try:
            step = self.captured(batch, capacity, chunks)
            step.fill(chunks)
            assert step.replay is not None
            step.replay()
            assert step.logits is not None
            self.replays += 1
            return step.logits[: len(chunks)].clone()
        except StrictFallbackError:
            raise
        except Exception as exc:
            why = exception_line(exc)
            self.recorder.record("path", "decode step", wanted=f"graph replay (batch {batch}, context {capacity})",
                                 instead="eager", why=why)
            self.steps.clear()
            self.failed = why  # every later step eager: the steps rewrite the same K/V into the same slots
            return None

    def drop_captures(self) -> None:
        """Forget every captured step (the weights or paths they replay were changed): each is captured again, and
        checked, when next met."""
        self.steps.clear()
