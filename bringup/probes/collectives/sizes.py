"""Message sizes: parsing "1,4K,1M,32M" and printing bytes the way people read them."""

from __future__ import annotations

import re

DEFAULT_SIZES = "1,4K,256K,4M,32M"
_UNITS = {"": 1, "B": 1, "K": 1024, "KB": 1024, "KIB": 1024, "M": 1024**2, "MB": 1024**2,
          "MIB": 1024**2, "G": 1024**3, "GB": 1024**3, "GIB": 1024**3}
_SIZE = re.compile(r"^\s*(\d+)\s*([A-Za-z]*)\s*$")


def parse_size(text: str) -> int:
    """'4K' -> 4096 bytes. Units are binary (K = 1024). Raises ValueError with the reason."""
    match = _SIZE.match(text)
    if not match or match.group(2).upper() not in _UNITS:
        raise ValueError(f"size {text!r} is not a byte count like 1, 4K, 256K, 32M")
    value = int(match.group(1)) * _UNITS[match.group(2).upper()]
    if value <= 0:
        raise ValueError(f"size {text!r} must be at least 1 byte")
    return value


def parse_sizes(text: str) -> list[int]:
    """'1,4K,1M' -> sorted unique byte counts."""
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise ValueError("no sizes given; use a list like 1,4K,256K,4M,32M")
    return sorted({parse_size(p) for p in parts})


def format_bytes(n: int) -> str:
    """4096 -> '4 KiB'; exact multiples only get the larger unit."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"
