"""The collective operations under test: buffers, the exact expected result, and the call to time.

Sizes follow nccl-tests: the case's byte size is the all_reduce/broadcast/send buffer, the all_gather
*output*, the reduce_scatter *input* and the all_to_all send buffer. Ops that split a buffer across ranks
round the element count down to a multiple of the world size (at least one element per rank).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist

from bringup.probes.collectives.patterns import corrupt_value, pattern, pattern_period, tile

OP_NAMES = (
    "all_reduce_sum", "all_reduce_max", "all_gather", "reduce_scatter",
    "broadcast", "all_to_all", "send_recv_ring", "barrier",
)
_PARTITIONED = {"all_gather", "reduce_scatter", "all_to_all"}
BROADCAST_ROOT = 0


class SkipCase(Exception):
    """The case cannot run in this world (e.g. a ring needs two ranks); the message says why."""


@dataclass
class CaseContext:
    rank: int
    world_size: int
    dtype: torch.dtype
    device: torch.device
    bound: int              # pattern values lie in [0, bound]
    count: int              # elements, already adjusted with `element_count`
    corrupt_elements: int   # > 0 only on a rank told to corrupt its contribution (test fault injection)
    salt: int = 0


@dataclass
class Prepared:
    run: Callable[[], None]                 # the timed collective call
    reset: Callable[[], None]               # untimed: restore inputs, poison outputs
    output: torch.Tensor | None = None
    expected: torch.Tensor | None = None

    def count_wrong(self) -> int:
        """Elements of the output that differ from the exact expected result."""
        if self.output is None or self.expected is None or torch.equal(self.output, self.expected):
            return 0
        return int(torch.count_nonzero(torch.ne(self.output, self.expected)).item())


def element_count(op: str, size_bytes: int, itemsize: int, world_size: int) -> int:
    """Elements for a case of `size_bytes` (at least one; a multiple of the world for split ops)."""
    if op == "barrier":
        return 0
    count = max(1, size_bytes // itemsize)
    if op in _PARTITIONED:
        count = max(world_size, count - count % world_size)
    return count


def prepare(op: str, ctx: CaseContext) -> Prepared:
    """Buffers and expected result for `op` on this rank. Raises SkipCase when it cannot run here."""
    return _PREPARE[op](ctx)


# -- helpers -----------------------------------------------------------------------------------------

def _source(ctx: CaseContext, count: int | None = None) -> torch.Tensor:
    """This rank's contribution on its device, corrupted when it was told to (test fault injection)."""
    values = pattern(ctx.rank, ctx.count if count is None else count, ctx.bound, ctx.salt, dtype=ctx.dtype)
    if ctx.corrupt_elements > 0:
        values[: ctx.corrupt_elements] = corrupt_value(ctx.bound)
    return values.to(ctx.device)


def _expected(ctx: CaseContext, period: torch.Tensor, count: int, start: int = 0) -> torch.Tensor:
    """An expected result that repeats `period`, on the device in the case's dtype."""
    return tile(period, count, start, ctx.dtype).to(ctx.device)


def _periods(ctx: CaseContext) -> list[torch.Tensor]:
    return [pattern_period(r, ctx.bound, ctx.salt) for r in range(ctx.world_size)]


def _poison(ctx: CaseContext, count: int) -> torch.Tensor:
    """An output buffer full of a value no correct result contains, so an unwritten element is counted."""
    return torch.full((count,), corrupt_value(ctx.bound), dtype=ctx.dtype, device=ctx.device)


def _gather_into(output: torch.Tensor, inp: torch.Tensor) -> None:
    fn = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    fn(output, inp)


def _reduce_scatter_into(output: torch.Tensor, inp: torch.Tensor) -> None:
    fn = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    fn(output, inp, op=dist.ReduceOp.SUM)


# -- operations --------------------------------------------------------------------------------------

def _all_reduce(ctx: CaseContext, reduce_op: str) -> Prepared:
    periods = torch.stack(_periods(ctx))
    if reduce_op == "sum":
        period, op = periods.sum(dim=0), dist.ReduceOp.SUM
    else:
        period, op = periods.amax(dim=0), dist.ReduceOp.MAX
    source = _source(ctx)
    work = source.clone()
    return Prepared(run=lambda: dist.all_reduce(work, op=op), reset=lambda: work.copy_(source),
                    output=work, expected=_expected(ctx, period, ctx.count))


def _all_gather(ctx: CaseContext) -> Prepared:
    per_rank = ctx.count // ctx.world_size
    source = _source(ctx, per_rank)
    expected = torch.cat([_expected(ctx, p, per_rank) for p in _periods(ctx)])
    output = _poison(ctx, ctx.count)
    return Prepared(run=lambda: _gather_into(output, source),
                    reset=lambda: output.fill_(corrupt_value(ctx.bound)), output=output, expected=expected)


def _reduce_scatter(ctx: CaseContext) -> Prepared:
    per_rank = ctx.count // ctx.world_size
    source = _source(ctx)
    period = torch.stack(_periods(ctx)).sum(dim=0)
    output = _poison(ctx, per_rank)
    return Prepared(run=lambda: _reduce_scatter_into(output, source),
                    reset=lambda: output.fill_(corrupt_value(ctx.bound)), output=output,
                    expected=_expected(ctx, period, per_rank, start=ctx.rank * per_rank))


def _broadcast(ctx: CaseContext) -> Prepared:
    source = _source(ctx) if ctx.rank == BROADCAST_ROOT else None
    work = _poison(ctx, ctx.count)

    def reset() -> None:
        if source is not None:
            work.copy_(source)
        else:
            work.fill_(corrupt_value(ctx.bound))

    return Prepared(run=lambda: dist.broadcast(work, src=BROADCAST_ROOT), reset=reset, output=work,
                    expected=_expected(ctx, _periods(ctx)[BROADCAST_ROOT], ctx.count))


def _all_to_all(ctx: CaseContext) -> Prepared:
    per_rank = ctx.count // ctx.world_size
    source = _source(ctx)   # chunk j goes to rank j
    start = ctx.rank * per_rank
    expected = torch.cat([_expected(ctx, p, per_rank, start) for p in _periods(ctx)])
    output = _poison(ctx, ctx.count)
    return Prepared(run=lambda: dist.all_to_all_single(output, source),
                    reset=lambda: output.fill_(corrupt_value(ctx.bound)), output=output, expected=expected)


def _send_recv_ring(ctx: CaseContext) -> Prepared:
    if ctx.world_size < 2:
        raise SkipCase("a send/recv ring needs at least 2 ranks")
    nxt, prev = (ctx.rank + 1) % ctx.world_size, (ctx.rank - 1) % ctx.world_size
    source = _source(ctx)
    output = _poison(ctx, ctx.count)

    def run() -> None:
        ops = [dist.P2POp(dist.isend, source, nxt), dist.P2POp(dist.irecv, output, prev)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return Prepared(run=run, reset=lambda: output.fill_(corrupt_value(ctx.bound)), output=output,
                    expected=_expected(ctx, _periods(ctx)[prev], ctx.count))


def _barrier(ctx: CaseContext) -> Prepared:
    return Prepared(run=lambda: dist.barrier(), reset=lambda: None)


_PREPARE: dict[str, Callable[[CaseContext], Prepared]] = {
    "all_reduce_sum": lambda ctx: _all_reduce(ctx, "sum"),
    "all_reduce_max": lambda ctx: _all_reduce(ctx, "max"),
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "broadcast": _broadcast,
    "all_to_all": _all_to_all,
    "send_recv_ring": _send_recv_ring,
    "barrier": _barrier,
}
