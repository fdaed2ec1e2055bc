"""A process group that runs gloo on host copies of device tensors: collectives for a device type that has no
collective library of its own.

Each call copies the tensors it reads to the host, starts gloo's call on the copies and returns a StagedWork;
waiting on that copies the results back into the device tensors. The copies are bit for bit, so results are exact,
and a timed call includes both copies: its bandwidth is the host-staged path's, not a device interconnect's.

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

from bringup.backends.host import HOST, HOST_DEVICE_TYPE, is_host
from bringup.probes.collectives.staging.work import CopyBack, StagedWork

if TYPE_CHECKING:
    from torch._C._distributed_c10d import AllgatherOptions

BACKEND_NAME = "gloo_host_staged"
GlooCall = Callable[..., dist.Work]


def _to_host(tensor: torch.Tensor) -> torch.Tensor:
    """A host copy of a tensor the call reads (the tensor itself when it is already on the host)."""
    return tensor if is_host(tensor.device) else tensor.to(HOST)


def _host_buffer(tensor: torch.Tensor) -> torch.Tensor:
    """A host tensor for a result the call only writes."""
    return tensor if is_host(tensor.device) else torch.empty_like(tensor, device=HOST)


def _back(device_tensors: list[torch.Tensor], host_tensors: list[torch.Tensor]) -> CopyBack:
    return [(d, h) for d, h in zip(device_tensors, host_tensors) if d is not h]


class HostStagedGroup(dist.ProcessGroup):
    """gloo on host copies; every call returns a StagedWork (dist's synchronous calls wait on it)."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self) -> str:  # the name torch asks a Python process group for
        return BACKEND_NAME

    def _in_place(self, call: GlooCall, tensors: list[torch.Tensor], *args) -> StagedWork:
        host = [_to_host(t) for t in tensors]
        return StagedWork(call(host, *args), _back(tensors, host), host)

    def allreduce(self, tensors: list[torch.Tensor], opts: dist.AllreduceOptions) -> StagedWork:
        return self._in_place(self._gloo.allreduce, tensors, opts)

    def broadcast(self, tensors: list[torch.Tensor], opts: dist.BroadcastOptions) -> StagedWork:
        return self._in_place(self._gloo.broadcast, tensors, opts)

    def _into(self, call: GlooCall, output: torch.Tensor, inp: torch.Tensor, *args) -> StagedWork:
        host_out, host_in = _host_buffer(output), _to_host(inp)
        return StagedWork(call(host_out, host_in, *args), _back([output], [host_out]), [host_in])

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
        host = [_to_host(t) for t in tensors]
        return StagedWork(self._gloo.send(host, dst, tag), [], host)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int) -> StagedWork:
        host = [_host_buffer(t) for t in tensors]
        return StagedWork(self._gloo.recv(host, src, tag), _back(tensors, host), host)

    def barrier(self, opts: dist.BarrierOptions | None = None) -> StagedWork:
        options = dist.BarrierOptions()   # gloo's barrier moves no tensor: the options' device is not passed on
        if opts is not None:
            options.timeout = opts.timeout
        return StagedWork(self._gloo.barrier(options), [], [])


def _create(store: dist.Store, rank: int, size: int, timeout: timedelta) -> HostStagedGroup:
    return HostStagedGroup(store, rank, size, timeout)


def register(device_type: str) -> None:
    """Make BACKEND_NAME an `init_process_group` backend for `device_type` in this process (each rank calls it
    before joining; torch then also names it the default backend for that device type, in this process only)."""
    dist.Backend.register_backend(BACKEND_NAME, _create, devices=[device_type, HOST_DEVICE_TYPE])
