"""Decode graphs as start-up (and the graph benchmarks) take them: every batch bucket captured at the first context
bucket, then each replay checked against the same step run eagerly (replay_check.py)."""

from __future__ import annotations

import torch

from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.graphs.decode_graphs import Capture, DecodeGraphs
from bringup.runner.engine.graphs.replay_check import check_inputs, step_difference
from bringup.runner.model.decoder import DecoderModel


def capture_checked(model: DecoderModel, block_size: int, batches: list[int], contexts: list[int], capture: Capture,
                    recorder: FallbackRecorder) -> tuple[DecodeGraphs, float]:
    """The graphs, and the largest relative max |replay - eager| of their logits; raises what the capture raises."""
    graphs = DecodeGraphs(model, block_size, batches, contexts, capture, recorder)
    with torch.inference_mode():
        for batch in batches:
            graphs.captured(batch, contexts[0])
        return graphs, replay_difference(graphs, contexts[0])


def replay_difference(graphs: DecodeGraphs, capacity: int) -> float:
    """The largest relative max |replay - eager| of the logits over the batch buckets captured at `capacity`, each
    on inputs other than those it was captured with."""
    return max(step_difference(step, check_inputs(step)) for (_, held), step in graphs.steps.items()
               if held == capacity)
