"""Algorithm and bus bandwidth, with the factors nccl-tests uses (doc/PERFORMANCE.md there).

algbw = size / time, where size is the nccl-tests "size" of the operation (see `case_bytes`).
busbw = algbw * factor: the factor turns algbw into the per-link traffic a ring algorithm needs, so
busbw is comparable across operations and world sizes and can be held against the hardware peak.
"""

from __future__ import annotations

# op name -> bus factor as a function of the world size n
_BUS_FACTORS = {
    "all_reduce_sum": lambda n: 2 * (n - 1) / n,
    "all_reduce_max": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send_recv_ring": lambda n: 1.0,
}


def bus_factor(op: str, world_size: int) -> float | None:
    """nccl-tests' busbw/algbw factor for `op` on `world_size` ranks; None for ops that move no data."""
    factor = _BUS_FACTORS.get(op)
    return None if factor is None else float(factor(world_size))


def algbw_gbps(size_bytes: int, seconds: float) -> float | None:
    """Algorithm bandwidth in GB/s (1e9 bytes per second, as nccl-tests prints it)."""
    if size_bytes <= 0 or seconds <= 0:
        return None
    return size_bytes / seconds / 1e9


def busbw_gbps(op: str, world_size: int, size_bytes: int, seconds: float) -> float | None:
    """Bus bandwidth in GB/s: algbw times the op's bus factor."""
    alg = algbw_gbps(size_bytes, seconds)
    factor = bus_factor(op, world_size)
    if alg is None or factor is None:
        return None
    return alg * factor
