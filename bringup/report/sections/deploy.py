"""Deploy with: what `bringup export` gives for each engine it knows, from this profile alone — the command, each
setting with its reason, each flag left out with why. The model is the most recently tuned one the engine loads, or
a placeholder; `bringup export --engine E --model M` gives the evidence behind each line."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.errors import BringupError
from bringup.export import ENGINE_NAMES, export_config
from bringup.export.render import shell_line
from bringup.profiles.schema import Profile


@dataclass
class DeployRow:
    name: str  # a flag or an environment variable
    value: str  # "" for a bare flag, "left out" for an omitted one
    reason: str


@dataclass
class DeployView:
    engine: str
    version: str
    model: str  # what export chose, with "(placeholder)" when no model is known
    command: str = ""  # one shell line
    rows: list[DeployRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: str | None = None  # why export gave nothing for this engine


def deploy_view(profile: Profile, engine: str) -> DeployView:
    try:
        config = export_config(profile, engine)
    except BringupError as e:
        return DeployView(engine, "", "", refused=str(e))
    model = config.model.path + ("" if config.model.given else " (placeholder)")
    rows = [DeployRow(s.name, s.value or "", s.reason) for s in config.settings]
    rows += [DeployRow(o.name, "left out", o.reason + (f" (to get it: {o.to_get})" if o.to_get else ""))
             for o in config.omitted]
    return DeployView(config.engine, config.engine_version, model, shell_line(config), rows,
                      [n.text for n in config.notes])


def deploy_views(profile: Profile) -> list[DeployView]:
    """One view per engine; none for a profile with no device (nothing to deploy on)."""
    if profile.device is None:
        return []
    return [deploy_view(profile, engine) for engine in ENGINE_NAMES]
