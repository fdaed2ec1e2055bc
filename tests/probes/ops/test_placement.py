"""Where an op ran, decided from its dispatcher events: a host copy inside an op names that op as falling back."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bringup.probes.ops.placement import HOST_COPY, placement_of, watch_placement


@dataclass(eq=False)
class Event:
    """What placement_of reads of a profiler FunctionEvent."""

    name: str
    cpu_parent: Event | None = None


def fallback_of(op: str, parent: Event | None = None, outputs: int = 1) -> list[Event]:
    """The calls a boxed CPU fallback makes: the op, its host copy (with the copy inside it), the copies back."""
    call = Event(op, parent)
    to_cpu = Event(HOST_COPY, call)
    inner = Event("aten::copy_", Event("aten::_to_copy", Event("aten::to", to_cpu)))
    events = [call, to_cpu, inner, Event("aten::_copy_from", inner)]
    for _ in range(outputs):
        back = Event("aten::copy_", call)
        events += [back, Event("aten::_copy_from", back)]
    return events


def test_no_host_copy_is_on_the_device():
    mm = Event("aten::mm")
    placement = placement_of([mm, Event("aten::empty", mm), Event("aten::copy_", mm)])
    assert placement.runs_on == "device" and placement.fallback_ops == ()
    assert placement.evidence == "no host copy among 3 dispatched calls"


def test_the_piece_of_a_composite_op_that_fell_back_is_named_with_its_copies():
    norm = Event("aten::rms_norm")
    events = [norm, Event("aten::pow", norm), Event("aten::mean", norm), *fallback_of("aten::rsqrt", norm, 1)]
    placement = placement_of(events)
    assert placement.runs_on == "host_fallback" and placement.fallback_ops == ("aten::rsqrt",)
    assert placement.evidence == f"aten::rsqrt copied arguments to the host ({HOST_COPY} x1) and results back (x1)"


def test_each_falling_back_op_is_named_once_and_each_result_copied_back_counts_once():
    events = [*fallback_of("aten::topk", outputs=2), *fallback_of("aten::sort", outputs=2),
              *fallback_of("aten::topk", outputs=2)]
    placement = placement_of(events)
    assert placement.fallback_ops == ("aten::topk", "aten::sort")
    assert placement.evidence.endswith(f"({HOST_COPY} x3) and results back (x6)")


def test_a_host_copy_at_the_top_level_is_still_a_fallback():
    placement = placement_of([Event(HOST_COPY)])
    assert placement.runs_on == "host_fallback" and placement.fallback_ops == ("(top level)",)


def test_on_the_host_nothing_is_watched_or_decided():
    with watch_placement(torch.device("cpu")) as watch:
        torch.ones(3).sum()
    assert watch.placement is None and not watch.dispatched
