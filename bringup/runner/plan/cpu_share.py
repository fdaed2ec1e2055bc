"""How much of the CPU the timed work got: the process's CPU time over its threads' wall time.

On the host, torch runs a step on `threads` threads that stay busy while it runs (OpenMP spins at its barriers), so
an idle machine gives them close to `threads` CPU-seconds per second of wall time. Another process holding a core
takes its share away: a busy loop on one of two cores leaves about two thirds. A timing with a low share was taken
on a contended machine, whatever its numbers say. On an accelerator the host mostly waits, and the share says
nothing: it is not measured there.
"""

from __future__ import annotations

import time

import torch


class CpuShare:
    """Wall and process CPU time accumulated over the windows between start() and stop()."""

    def __init__(self, on_host: bool) -> None:
        self.on_host = on_host
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self._began: tuple[float, float] | None = None

    def start(self) -> None:
        self._began = (time.perf_counter(), time.process_time())

    def stop(self) -> None:
        if self._began is not None:
            wall, cpu = self._began
            self.wall_s += time.perf_counter() - wall
            self.cpu_s += time.process_time() - cpu
            self._began = None

    def share(self) -> float | None:
        """CPU seconds per wall second per thread, at most 1.0 (None: off the host, or nothing timed)."""
        if not self.on_host or self.wall_s <= 0:
            return None
        return min(1.0, self.cpu_s / (self.wall_s * torch.get_num_threads()))
