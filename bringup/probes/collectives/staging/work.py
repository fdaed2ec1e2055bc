"""The handle a host-staged call returns: waiting on it waits for gloo, then copies the results back."""

from __future__ import annotations

from datetime import timedelta

import torch
import torch.distributed as dist

from bringup.probes.collectives.staging.pool import HostBuffers

CopyBack = list[tuple[torch.Tensor, torch.Tensor]]   # (device tensor, the host tensor gloo wrote)


class StagedWork(dist.Work):
    """gloo's work on host copies. `wait()` raises what gloo raised (a peer that died, a timeout); after a
    successful wait the device tensors hold the results and the lent host buffers go back to the pool."""

    def __init__(self, gloo: dist.Work, copy_back: CopyBack, lent: list[torch.Tensor], pool: HostBuffers) -> None:
        super().__init__()
        self._gloo = gloo
        self._copy_back = copy_back
        self._lent = lent       # host buffers gloo reads or writes until it is done (never a caller's tensor)
        self._pool = pool
        self._done = False

    def wait(self, timeout: timedelta | None = None) -> bool:
        if not self._done:
            if timeout is None:
                self._gloo.wait()
            else:
                self._gloo.wait(timeout)
            for device_tensor, host_tensor in self._copy_back:
                device_tensor.copy_(host_tensor)
            self._done = True
            self._pool.give_back(self._lent)
            self._lent = []
        return True

    def is_completed(self) -> bool:
        return self._done

    def get_future(self) -> torch.futures.Future:
        """A future that is already done: it waits for the call first (staging has no asynchronous copy back)."""
        self.wait()
        future: torch.futures.Future = torch.futures.Future()
        future.set_result([device_tensor for device_tensor, _ in self._copy_back])
        return future
