"""Numbers and durations as a person reads them; '—' where a value was not recorded."""

from __future__ import annotations

MISSING = "—"


def number(value: float | int | None, digits: int = 3) -> str:
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int) or abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def byte_size(value: float | int | None) -> str:
    if value is None:
        return MISSING
    size = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{value} B"


def percent(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}%"


def one_line(text: str | None, limit: int = 400) -> str:
    """Whitespace runs (newlines included) as one space, cut to `limit` characters."""
    if text is None:
        return ""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
