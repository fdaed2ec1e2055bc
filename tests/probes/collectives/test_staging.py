"""The host-staged group's pieces, in this process: the work's copy back, and every call on a one-rank gloo world
(device tensors and two-rank worlds run in tests/emulator/test_collectives_stage.py)."""

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions

from bringup.probes.collectives.staging.group import BACKEND_NAME, HostStagedGroup
from bringup.probes.collectives.staging.pool import HostBuffers
from bringup.probes.collectives.staging.work import StagedWork


class FakeGloo(dist.Work):
    def __init__(self, host: torch.Tensor, result: float, error: Exception | None = None) -> None:
        super().__init__()
        self.host, self.result, self.error, self.waits = host, result, error, 0

    def wait(self, timeout: timedelta | None = None) -> bool:
        self.waits += 1
        if self.error is not None:
            raise self.error
        self.host.fill_(self.result)
        return True


def test_waiting_copies_the_result_back_once_and_returns_the_buffer():
    device, host, pool = torch.zeros(3), torch.zeros(3), HostBuffers()
    gloo = FakeGloo(host, 7.0)
    work = StagedWork(gloo, [(device, host)], [host], pool)
    assert not work.is_completed() and device.tolist() == [0.0, 0.0, 0.0] and pool.held_bytes == 0
    assert work.wait() and work.is_completed() and device.tolist() == [7.0, 7.0, 7.0]
    assert pool.lend(torch.empty(3)) is host
    device.zero_()
    assert work.get_future().value()[0] is device and device.tolist() == [0.0, 0.0, 0.0] and gloo.waits == 1


def test_a_failed_call_raises_on_wait_and_copies_nothing():
    device, host = torch.zeros(2), torch.zeros(2)
    pool = HostBuffers()
    work = StagedWork(FakeGloo(host, 1.0, RuntimeError("peer closed the connection")), [(device, host)], [host],
                      pool)
    with pytest.raises(RuntimeError, match="peer closed"):
        work.wait()
    assert not work.is_completed() and device.tolist() == [0.0, 0.0]
    assert pool.held_bytes == 0  # gloo may still hold the buffer: it is not lent again


def test_the_pool_lends_by_dtype_shape_and_strides_and_keeps_a_bounded_amount():
    pool = HostBuffers(kept_bytes=64)
    first = pool.lend(torch.empty(4, 2))
    assert first.shape == (4, 2) and first.dtype == torch.float32
    pool.give_back([first])
    assert pool.lend(torch.empty(4, 2).t()) is not first and pool.lend(torch.empty(8)) is not first
    assert pool.lend(torch.empty(4, 2, dtype=torch.int32)) is not first and pool.lend(torch.empty(4, 2)) is first
    older, newer = torch.empty(8), torch.empty(8)   # 32 bytes each: a third pushes the oldest out
    pool.give_back([older, newer, torch.empty(8)])
    assert pool.held_bytes == 64 and pool.lend(torch.empty(8)) is not older


@pytest.fixture
def group() -> HostStagedGroup:
    return HostStagedGroup(dist.HashStore(), 0, 1, timedelta(seconds=10))


def test_every_call_runs_through_gloo_on_a_one_rank_world(group):
    assert group.getBackendName() == BACKEND_NAME and (group.rank(), group.size()) == (0, 1)
    values = torch.arange(4.0)
    reduced = values.clone()
    group.allreduce([reduced], dist.AllreduceOptions()).wait()
    gathered, scattered, exchanged = torch.full((4,), -1.0), torch.full((4,), -1.0), torch.full((4,), -1.0)
    group.all_gather_single(gathered, values, AllgatherOptions()).wait()
    group._reduce_scatter_base(scattered, values, dist.ReduceScatterOptions()).wait()
    group.alltoall_base(exchanged, values, [], [], dist.AllToAllOptions()).wait()
    broadcast = values.clone()
    group.broadcast([broadcast], dist.BroadcastOptions()).wait()
    assert group.barrier(dist.BarrierOptions()).wait()
    for result in (reduced, gathered, scattered, exchanged, broadcast):
        assert torch.equal(result, values)
