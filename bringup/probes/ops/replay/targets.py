"""What verify-ops captures and replays: the compiled comparison's composite blocks (the runner's decoder layer
among them) and one whole decode step of the runner's model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bringup.probes.ops.compiled.blocks import BLOCKS
from bringup.probes.ops.inputs import dtype_from_name, generator
from bringup.probes.ops.replay import decode_step
from bringup.profiles.sections.graph_replay import DECODE_STEP

TARGETS: tuple[str, ...] = (*BLOCKS, DECODE_STEP)


@dataclass(frozen=True)
class ReplayTarget:
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    inputs: Callable[[int], list[Any]]  # raw CPU inputs for draw n (0: the capture's, 1.. the replays')


def replay_target(name: str, dtype_name: str, device: torch.device) -> ReplayTarget:
    """The block's device function, its float64 CPU reference and its seeded inputs."""
    if name == DECODE_STEP:
        make_inputs: Callable[[torch.Generator], list[Any]] = decode_step.inputs
        builder = decode_step.build
        fn = ref = None
    else:
        block = BLOCKS[name]
        make_inputs, builder, fn, ref = block.inputs, block.build, block.fn, block.ref or block.fn
    if builder is not None:
        fn, ref = builder(dtype_from_name(dtype_name), device), builder(torch.float64, torch.device("cpu"))
    assert fn is not None and ref is not None

    def draw(n: int) -> list[Any]:
        return make_inputs(generator("block", name) if n == 0 else generator("replay", name, str(n)))

    return ReplayTarget(fn, ref, draw)
