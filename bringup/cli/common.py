"""Options every stage shares (those the engine shares too come from its options' one definition), and the
context a stage starts from.

Importing this module stays light (no torch, no profiles): `--help` of every command reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bringup.cli.engine_flags import option_type

if TYPE_CHECKING:
    import torch

    from bringup.backends.base import DeviceInfo
    from bringup.backends.selection.select import Selection

DeviceOption = option_type("device")
ProfileOption = option_type("profile_path")
StrictOption = option_type("strict")
ModelOption = option_type("model_dir")
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of tables.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show debug logs.")]
DetailsOption = Annotated[bool, typer.Option("--details", help="Print the full tables, not only the summary.")]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite a profile recorded for another device or schema version.")
]
OVERWRITES_TOO = "Also overwrite a profile recorded for another device or schema version."  # --force, a stage's


@dataclass
class StageContext:
    selection: Selection
    profile_path: Path
    strict: bool
    json: bool
    force: bool

    @property
    def device(self) -> torch.device:
        return self.selection.device

    @property
    def info(self) -> DeviceInfo:
        return self.selection.info


def recorded_device(profile: Path | None, force: bool) -> str | None:
    from bringup.errors import BringupError
    from bringup.profiles.store import load_profile

    if profile is None or not profile.exists():
        return None
    try:
        loaded = load_profile(profile)
    except BringupError:
        if force:
            return None
        raise
    return loaded.device.id if loaded.device else None


def stage_context(
    device: str | None,
    profile: Path | None,
    json: bool,
    verbose: bool,
    strict: bool = False,
    force: bool = False,
) -> StageContext:
    from bringup.backends.selection.select import select_device
    from bringup.log import configure_logging, get_logger
    from bringup.profiles.store import default_profile_path, ensure_profile_matches

    configure_logging(verbose)
    if device is not None and "," in device:
        from bringup.errors import BringupError

        raise BringupError(f"--device {device!r} names several devices, and this command measures and records one "
                           "device's profile: name one (generate, serve and all take several)")
    selection = select_device(device, recorded_device(profile, force))
    path = profile if profile is not None else default_profile_path(selection.info)
    ensure_profile_matches(path, selection.info, force)
    get_logger("cli").debug("profile path: %s", path)
    return StageContext(selection, path, strict, json, force)
