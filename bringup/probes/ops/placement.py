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
from bringup.profiles.sections.ops import HOST_FALLBACK, ON_DEVICE, RunsOn

HOST_COPY = "aten::_to_cpu"  # the copy every tensor argument of a fallback op makes to the host
COPY_BACK = ("aten::_copy_from", "aten::_copy_from_and_resize", "aten::copy_")
KINETO_QUIET = "6"  # above every level: kineto otherwise prints two lines to stderr per profiling session


@dataclass(frozen=True)
class Placement:
    runs_on: RunsOn
    evidence: str
    fallback_ops: tuple[str, ...] = ()  # the dispatched ops that copied their arguments to the host


@dataclass
class PlacementWatch:
    """Filled when the watched block ends; `placement` is None where nothing was watched (the host itself)."""

    placement: Placement | None = None
    dispatched: Counter = field(default_factory=Counter)


def placement_of(events: list) -> Placement:
    """The verdict over one op's recorded dispatcher events (FunctionEvent-like: .name, .cpu_parent)."""
    copies = [event for event in events if event.name == HOST_COPY]
    if not copies:
        return Placement(ON_DEVICE, f"no host copy among {len(events)} dispatched calls")
    callers = [_caller(event) for event in copies]
    ops = tuple(dict.fromkeys(_name(caller) for caller in callers))
    back = sum(event.name in COPY_BACK and _copies_back_for(event, callers) for event in events)
    evidence = (f"{', '.join(ops)} copied arguments to the host ({HOST_COPY} x{len(copies)}) "
                f"and results back (x{back})")
    return Placement(HOST_FALLBACK, evidence, ops)


def _caller(event):
    """The op that made a host copy (None: the copy was dispatched at the top level of the block)."""
    parent = getattr(event, "cpu_parent", None)
    while parent is not None and parent.name == HOST_COPY:
        parent = getattr(parent, "cpu_parent", None)
    return parent


def _name(event) -> str:
    return event.name if event is not None else "(top level)"


def _copies_back_for(event, callers: list) -> bool:
    """Whether a copy was made by a falling-back op itself (counted once: not inside another copy, nor inside the
    host copy of its arguments)."""
    parent = getattr(event, "cpu_parent", None)
    while parent is not None:
        if parent.name == HOST_COPY or parent.name in COPY_BACK:
            return False
        if any(parent is caller for caller in callers):
            return True
        parent = getattr(parent, "cpu_parent", None)
    return False


@contextlib.contextmanager
def watch_placement(device: torch.device) -> Iterator[PlacementWatch]:
    """Record what the block dispatches and decide where it ran, also when the block raises (the error may have
    come from the host's kernel); on the host there is nothing to decide."""
    watch = PlacementWatch()
    if is_host(device):
        yield watch
        return
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)  # read when kineto starts, on the first session
    recorded = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    try:
        with recorded:
            yield watch
    finally:
        events = list(recorded.events())
        watch.dispatched.update(event.name for event in events)
        watch.placement = placement_of(events)
