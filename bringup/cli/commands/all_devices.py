"""`bringup all --device emu:0,emu:1` (or a family name of several devices): the stages on each device in turn, in a
process of its own with the same arguments but --device, each writing that device's own profile (the default
profiles/<device>.yaml: --profile names one device's file, so it is refused with several)."""

from __future__ import annotations

import subprocess
import sys

from bringup.errors import BringupError

DEVICE_FLAGS = ("--device", "-d")


def devices_named(device: str | None, profile: object) -> list[str] | None:
    """The ids --device names when it names several; None when it names one."""
    if device is None or ("," not in device and ":" in device):
        return None
    from bringup.backends.selection.device_set import device_set

    infos = device_set(device)
    if infos is None:
        return None
    if profile is not None:
        raise BringupError("--profile names one device's profile; with several devices `bringup all` writes each "
                           "to profiles/<device>.yaml: leave --profile out")
    return [info.id for info in infos]


def with_device(argv: list[str], device: str) -> list[str]:
    """`argv` with its --device value replaced by `device`."""
    out, skip = [], False
    for arg in argv:
        if skip:
            out.append(device)
            skip = False
        elif arg in DEVICE_FLAGS:
            out.append(arg)
            skip = True
        elif arg.startswith("--device="):
            out.append(f"--device={device}")
        else:
            out.append(arg)
    return out


def run_each(ids: list[str]) -> int:
    """`bringup all` on each device in turn; the worst exit code."""
    worst = 0
    for device in ids:
        print(f"bringup all: {device} ({ids.index(device) + 1} of {len(ids)})", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, "-m", "bringup", *with_device(sys.argv[1:], device)], check=False)
        worst = max(worst, done.returncode)
    return worst
