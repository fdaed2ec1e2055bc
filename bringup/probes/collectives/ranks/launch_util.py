"""Small process helpers shared by the launcher, the zygote and the workers (Linux features guarded)."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def set_parent_death_signal() -> None:
    """Ask the kernel to SIGKILL this process when its parent dies (Linux; elsewhere a no-op)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def child_setup(group_leader: int) -> None:
    """Between fork and exec: join (or lead) the launch's process group, and die with the parent."""
    try:
        os.setpgid(0, group_leader)
    except OSError:
        os.setpgid(0, 0)
    set_parent_death_signal()
