"""Rank-dependent integer-valued data whose collective results are known exactly.

Every element of rank r's buffer is an integer in [0, m]. m is chosen per dtype and world size so that
a sum over all ranks -- and a sum containing one deliberately corrupted element, m + 1 -- is still an
integer the dtype represents exactly. Results can then be compared with `!=`, and every differing
element is a real error (a wrong, missing, misplaced or stale value), never rounding.
"""

from __future__ import annotations

import torch

# Largest n such that every integer in [0, n] is exactly representable.
_EXACT_LIMIT = {
    torch.float16: 2**11,
    torch.bfloat16: 2**8,
    torch.float32: 2**24,
    torch.float64: 2**53,
    torch.int8: 2**7 - 1,
    torch.uint8: 2**8 - 1,
    torch.int16: 2**15 - 1,
    torch.int32: 2**31 - 1,
    torch.int64: 2**63 - 1,
}
_PATTERN_CAP = 1021  # keeps values small; a prime, so index and rank terms wrap irregularly

SUPPORTED_DTYPES = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "float64": torch.float64, "int32": torch.int32, "int64": torch.int64,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
}
DEFAULT_DTYPES = ("float32", "bfloat16", "float16", "int32")


def value_bound(dtype: torch.dtype, world_size: int) -> int | None:
    """The largest pattern value m for this dtype and world; None when even m = 1 cannot be summed exactly."""
    limit = _EXACT_LIMIT.get(dtype)
    if limit is None:
        return None
    m = min(_PATTERN_CAP, (limit - 1) // world_size)
    return m if m >= 1 else None


def pattern_period(rank: int, bound: int, salt: int = 0) -> torch.Tensor:
    """One period (bound + 1 values) of rank `rank`'s data; the data repeats with this period."""
    index = torch.arange(bound + 1, dtype=torch.int64)
    return (index * 7 + rank * 13 + salt * 31 + 1) % (bound + 1)


def tile(period: torch.Tensor, count: int, start: int = 0, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Elements start .. start+count-1 of the sequence that repeats `period` (cheap: a copy, no arithmetic)."""
    length = period.numel()
    offset = start % length
    repeats = -(-(offset + count) // length)
    return period.to(dtype).repeat(repeats)[offset: offset + count]


def pattern(rank: int, count: int, bound: int, salt: int = 0, start: int = 0,
            dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """Rank `rank`'s data, elements start .. start+count-1: integers in [0, bound], differing by rank,
    index and salt."""
    return tile(pattern_period(rank, bound, salt), count, start, dtype)


def corrupt_value(bound: int) -> int:
    """A value no pattern element takes, but still exact when summed with the others (see module doc)."""
    return bound + 1
