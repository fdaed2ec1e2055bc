"""Bisect a wrong replay to its first op: run the block eagerly keeping every op's output, capture it again
keeping a device copy of every op's output (the copies are captured too, so a replay refreshes them), replay,
and name the first op whose replayed output differs from its eager output by more than the dtype's tolerance."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from bringup.probes.ops.judge.tolerances import row_for
from bringup.probes.ops.sync import synchronize


class KeepOutputs(TorchDispatchMode):
    """Every op's tensor outputs, in call order, as `keep` makes them (a host copy, a device clone)."""

    def __init__(self, keep: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        self.keep = keep
        self.seen: list[tuple[str, torch.Tensor]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        for leaf in tree_leaves(out):
            if isinstance(leaf, torch.Tensor):
                self.seen.append((str(func), self.keep(leaf)))
        return out


def _differs(replayed: torch.Tensor, eager: torch.Tensor, dtype: str) -> bool:
    if replayed.shape != eager.shape:
        return True
    if not eager.is_floating_point():
        return not torch.equal(replayed, eager)
    row = row_for(dtype)
    return not torch.allclose(replayed.double(), eager.double(), rtol=row.rtol, atol=row.atol, equal_nan=True)


def first_bad_op(capture: Callable[[Callable[[], None]], Callable[[], None] | None], fn: Callable[..., Any],
                 args: list[Any], dtype: str, device: torch.device) -> tuple[str | None, str]:
    """(the first op whose replayed output differs from eager, or None; what was compared)."""
    eager = KeepOutputs(lambda t: t.detach().to("cpu"))
    with torch.no_grad(), eager:
        fn(*args)
    kept = KeepOutputs(lambda t: t.detach().clone())

    def step() -> None:
        kept.seen.clear()  # the warm-up runs' copies go; the captured run's stay
        with kept:
            fn(*args)

    with torch.no_grad():
        replay = capture(step)
        if replay is None:
            return None, "no executed capture to bisect with"
        replay()
        synchronize(device)
    for index, ((name, expected), (_, got)) in enumerate(zip(eager.seen, kept.seen)):
        if _differs(got.to("cpu"), expected, dtype):
            return name, f"op {index + 1} of {len(eager.seen)}"
    return None, f"each of {min(len(eager.seen), len(kept.seen))} ops' replayed outputs matched eager"
