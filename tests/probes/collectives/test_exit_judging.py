"""How the launcher judges a rank's exit: by what the rank wrote before it went, read to the end first."""

from __future__ import annotations

import json
import os
import selectors
from pathlib import Path

from bringup.probes.collectives.ranks.launcher import Fault, RankState, judge_exits


def rank_with_pipe(rank: int, messages: list[dict]) -> tuple[RankState, int]:
    """A rank state reading a real pipe into which `messages` were written (the write end stays open, as a
    sibling's inherited copy would keep it)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    for message in messages:
        os.write(write_fd, (json.dumps(message) + "\n").encode())
    return RankState(rank=rank, fd=read_fd, log_path=Path(os.devnull)), write_fd


def test_done_still_in_the_pipe_when_the_exit_is_seen_is_a_clean_exit():
    finished, keep_finished = rank_with_pipe(0, [{"type": "done"}])
    silent, keep_silent = rank_with_pipe(1, [])
    selector = selectors.DefaultSelector()
    for state in (finished, silent):
        selector.register(state.fd, selectors.EVENT_READ, state)
    faults: list[Fault] = []
    try:
        judge_exits([finished, silent], {0: 0, 1: 0}, selector, faults)
    finally:
        selector.close()
        for fd in (keep_finished, keep_silent, finished.fd, silent.fd):
            if fd is not None:
                os.close(fd)
    assert finished.done and finished.exit_code == 0
    assert [(f.rank, f.kind) for f in faults] == [(1, "exited")]
    assert "rank 1 exited with code 0 during start-up without reporting an error" in faults[0].detail
