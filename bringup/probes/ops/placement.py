"""Where an op ran: on the device, or through the host, decided from what it dispatched while it ran.

A backend that lacks a kernel often registers torch's boxed CPU fallback (`at::native::cpu_fallback`: out-of-tree
PrivateUse1 backends, MPS with PYTORCH_ENABLE_MPS_FALLBACK, XLA). It copies every tensor argument to the host with
`aten::_to_cpu`, runs the CPU kernel and copies the results back: the answer is right and the device is idle.
That copy is the signature looked for here, among the dispatcher calls the op made (recorded by the autograd
profiler, which sees nested calls that a dispatch mode does not). The op that made the copy is named: for a
composite op (rms_norm, say) it is the piece that fell back.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from bringup.backends.host import is_host

HOST_COPY = "aten::_to_cpu"  # the copy every tensor argument of a fallback op makes to the host
COPY_BACK = ("aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_")
KINETO_QUIET = "6"  # above every level: kineto otherwise prints two lines to stderr per profiling session
DEVICE = "device"
HOST_FALLBACK = "host_fallback"


@dataclass(frozen=True)
class Placement:
    runs_on: str  # DEVICE or HOST_FALLBACK
    evidence: str
    fallback_ops: tuple[str, ...] = ()  # the dispatched ops that copied their arguments to the host


@dataclass
class PlacementWatch:
    """Filled when the watched block ends; `placement` is None where nothing was watched (the host itself)."""

    placement: Placement | None = None
    dispatched: Counter = field(default_factory=Counter)


def placement_of(events: list) -> Placement:
    """The verdict over one op's recorded dispatcher events (FunctionEvent-like: .name, .cpu_parent)."""
    names = Counter(event.name for event in events)
    fell_back = Counter(_parent_name(event) for event in events if event.name == HOST_COPY)
    if not fell_back:
        return Placement(DEVICE, f"no host copy among {sum(names.values())} dispatched calls")
    ops = tuple(fell_back)
    back = sum(names[name] for name in COPY_BACK)
    evidence = (f"{', '.join(ops)} copied arguments to the host ({HOST_COPY} x{sum(fell_back.values())}, "
                f"copies back x{back})")
    return Placement(HOST_FALLBACK, evidence, ops)


def _parent_name(event) -> str:
    parent = getattr(event, "cpu_parent", None)
    while parent is not None and parent.name == HOST_COPY:
        parent = getattr(parent, "cpu_parent", None)
    return parent.name if parent is not None else "(top level)"


@contextlib.contextmanager
def watch_placement(device: torch.device) -> Iterator[PlacementWatch]:
    """Record what the block dispatches and decide where it ran; on the host there is nothing to decide."""
    watch = PlacementWatch()
    if is_host(device):
        yield watch
        return
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)  # read when kineto starts, on the first session
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as recorded:
        yield watch
    events = list(recorded.events())
    watch.dispatched.update(event.name for event in events)
    watch.placement = placement_of(events)
