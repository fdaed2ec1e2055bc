"""A process group that runs gloo on host copies of device tensors: collectives for a device type that has no
collective library of its own.

Each call copies its tensors into host buffers (reused from call to call: pool.py), starts gloo's call on them
and returns a StagedWork; waiting on that copies the results back into the device tensors. The copies are bit
for bit, so results are exact, and a timed call includes the copies: its bandwidth is the host-staged path's,
not a device interconnect's.

It implements the calls verify-collectives and fleet make (all_reduce, broadcast, all_gather and reduce_scatter into
one tensor, all_to_all_single, send, recv, barrier) under both names torch has used for them. Host tensors pass
through uncopied. Object collectives and gloo's monitored barrier run on a plain gloo group beside this one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING

import torch
import torch.distributed as dist

from bringup.backends.host import HOST_DEVICE_TYPE, is_host
from bringup.probes.collectives.staging.pool import HostBuffers
from bringup.probes.collectives.staging.work import CopyBack, StagedWork

if TYPE_CHECKING:
    from torch._C._distributed_c10d import AllgatherOptions

BACKEND_NAME = "gloo_host_staged"
GlooCall = Callable[..., dist.Work]


class _Staging:
    """One call's host side: the buffers it lent, and which of them to copy back into which device tensor."""

    def __init__(self, pool: HostBuffers) -> None:
        self.pool = pool
        self.lent: list[torch.Tensor] = []
        self.copy_back: CopyBack = []

    def _buffer(self, like: torch.Tensor) -> torch.Tensor:
        buffer = self.pool.lend(like)
        self.lent.append(buffer)
        return buffer

    def read(self, tensor: torch.Tensor) -> torch.Tensor:
        """A host copy of a tensor the call reads (the tensor itself when it is already on the host)."""
        return tensor if is_host(tensor.device) else self._buffer(tensor).copy_(tensor)

    def update(self, tensor: torch.Tensor) -> torch.Tensor:
        """A host copy of a tensor the call writes (and may read), copied back into `tensor` on wait. Copied in
        even where the call only writes: the buffer is reused, and an element gloo leaves unwritten must keep the
        device's value (the stage's poison), not an earlier call's result."""
        if is_host(tensor.device):
            return tensor
        buffer = self.read(tensor)
        self.copy_back.append((tensor, buffer))
        return buffer

    def work(self, gloo: dist.Work) -> StagedWork:
        return StagedWork(gloo, self.copy_back, self.lent, self.pool)


class HostStagedGroup(dist.ProcessGroup):
    """gloo on host copies; every call returns a StagedWork (dist's synchronous calls wait on it)."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)
        self._buffers = HostBuffers()

    def getBackendName(self) -> str:  # the name torch asks a Python process group for
        return BACKEND_NAME

    def _in_place(self, call: GlooCall, tensors: list[torch.Tensor], *args) -> StagedWork:
        staging = _Staging(self._buffers)
        return staging.work(call([staging.update(t) for t in tensors], *args))

    def allreduce(self, tensors: list[torch.Tensor], opts: dist.AllreduceOptions) -> StagedWork:
        return self._in_place(self._gloo.allreduce, tensors, opts)

    def broadcast(self, tensors: list[torch.Tensor], opts: dist.BroadcastOptions) -> StagedWork:
        return self._in_place(self._gloo.broadcast, tensors, opts)

    def _into(self, call: GlooCall, output: torch.Tensor, inp: torch.Tensor, *args) -> StagedWork:
        staging = _Staging(self._buffers)
        return staging.work(call(staging.update(output), staging.read(inp), *args))

    def all_gather_single(self, output: torch.Tensor, inp: torch.Tensor, opts: AllgatherOptions) -> StagedWork:
        return self._into(self._gloo._allgather_base, output, inp, opts)

    def reduce_scatter_single(self, output: torch.Tensor, inp: torch.Tensor,
                              opts: dist.ReduceScatterOptions) -> StagedWork:
        return self._into(self._gloo._reduce_scatter_base, output, inp, opts)

    def all_to_all_single(self, output: torch.Tensor, inp: torch.Tensor, output_splits: list[int],
                          input_splits: list[int], opts: dist.AllToAllOptions) -> StagedWork:
        return self._into(self._gloo.alltoall_base, output, inp, output_splits, input_splits, opts)

    # the names older torch releases call the same three by
    _allgather_base = all_gather_single
    _reduce_scatter_base = reduce_scatter_single
    alltoall_base = all_to_all_single

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int) -> StagedWork:
        staging = _Staging(self._buffers)
        return staging.work(self._gloo.send([staging.read(t) for t in tensors], dst, tag))

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> StagedWork:
        staging = _Staging(self._buffers)
        return staging.work(self._gloo.recv([staging.update(t) for t in tensors], src, tag))

    def barrier(self, opts: dist.BarrierOptions | None = None) -> StagedWork:
        options = dist.BarrierOptions()   # gloo's barrier moves no tensor: the options' device is not passed on
        if opts is not None:
            options.timeout = opts.timeout
        return _Staging(self._buffers).work(self._gloo.barrier(options))


def _create(store: dist.Store, rank: int, size: int, timeout: timedelta) -> HostStagedGroup:
    return HostStagedGroup(store, rank, size, timeout)


def register(device_type: str) -> None:
    """Make BACKEND_NAME an `init_process_group` backend for `device_type` in this process (each rank calls it
    before joining; torch then also names it the default backend for that device type, in this process only)."""
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=[device_type, HOST_DEVICE_TYPE])
