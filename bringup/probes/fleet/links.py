"""Per-link bandwidth: rank r and rank r+1 (mod N) ping-pong a buffer with send/recv, one link at a time.

The link's figure is 2 x bytes / fastest round trip (each round trip moves the buffer both ways; the
fastest, because other traffic and processes only ever slow a round trip down). The other ranks wait in a
barrier meanwhile, so a link is measured alone and links are comparable.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from bringup.probes.collectives.execute import RankSetup

REPS = 40
WARMUP = 1


def link_name(sender: int, receiver: int) -> str:
    return f"{sender}->{receiver}"


def ping_pong(setup: RankSetup, sender: int, receiver: int, nbytes: int) -> float | None:
    """Run the ping-pong if this rank is one end of the link; the sender returns GB/s, others None."""
    if setup.rank not in (sender, receiver) or sender == receiver:
        return None
    buffer = torch.zeros(max(1, nbytes // 4), dtype=torch.float32, device=setup.device)
    peer = receiver if setup.rank == sender else sender
    times: list[float] = []
    for repetition in range(1, WARMUP + REPS + 1):  # a count both ends know (a clock could stop them apart)
        setup.synchronize()
        start = time.perf_counter()
        if setup.rank == sender:
            dist.send(buffer, peer)
            dist.recv(buffer, peer)
        else:
            dist.recv(buffer, peer)
            dist.send(buffer, peer)
        setup.synchronize()
        if repetition > WARMUP:
            times.append(time.perf_counter() - start)
    if setup.rank != sender:
        return None
    return 2 * buffer.numel() * buffer.element_size() / min(times) / 1e9
