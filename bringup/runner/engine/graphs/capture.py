"""The device family's graph capture (Backend.capture_graph: warm-up runs, then the capture) as DecodeGraphs calls
it: a body in, its replay out; an error where the family has no executed capture in bringup."""

from __future__ import annotations

from collections.abc import Callable

import torch

from bringup.backends.registry import backend_for


def family_capture(device: torch.device) -> Callable[[Callable[[], None]], Callable[[], None]]:
    backend = backend_for(device)

    def capture(body: Callable[[], None]) -> Callable[[], None]:
        replay = backend.capture_graph(device, body)
        if replay is None:
            raise RuntimeError(f"{backend.graph_api() or 'graph capture'} has no executed capture in bringup for "
                               f"{device.type}")
        return replay

    return capture
