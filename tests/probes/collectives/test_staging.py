"""The host-staged group's pieces, in this process: the work's copy back, and every call on a one-rank gloo world
(device tensors and two-rank worlds run in tests/emulator/test_collectives_stage.py)."""

from datetime import timedelta

import pytest
import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions

from bringup.probes.collectives.staging.group import BACKEND_NAME, HostStagedGroup
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


def test_waiting_copies_the_result_back_once():
    device, host = torch.zeros(3), torch.zeros(3)
    gloo = FakeGloo(host, 7.0)
    work = StagedWork(gloo, [(device, host)], [host])
    assert not work.is_completed() and device.tolist() == [0.0, 0.0, 0.0]
    assert work.wait() and work.is_completed() and device.tolist() == [7.0, 7.0, 7.0]
    device.zero_()
    assert work.get_future().value()[0] is device and device.tolist() == [0.0, 0.0, 0.0] and gloo.waits == 1


def test_a_failed_call_raises_on_wait_and_copies_nothing():
    device, host = torch.zeros(2), torch.zeros(2)
    work = StagedWork(FakeGloo(host, 1.0, RuntimeError("peer closed the connection")), [(device, host)], [])
    with pytest.raises(RuntimeError, match="peer closed"):
        work.wait()
    assert not work.is_completed() and device.tolist() == [0.0, 0.0]


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
