"""One profile file per host, device and rank inside the fleet folder, and the fleet's own index file."""

from __future__ import annotations

import re
from pathlib import Path

FLEET_FILE = "fleet.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-") or "x"


def rank_profile_path(out_dir: Path, host: str, device: str, rank: int) -> Path:
    """`<out>/<host>_<device>_rank<R>.yaml`: the rank keeps CPU ranks of one host apart."""
    return Path(out_dir) / f"{safe(host)}_{safe(device.replace(':', ''))}_rank{rank}.yaml"


def is_fleet_folder(path: Path) -> bool:
    return Path(path).is_dir() and (Path(path) / FLEET_FILE).is_file()
