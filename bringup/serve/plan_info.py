"""The execution plan and a summary of the capability profile it was derived from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from bringup.log import get_logger
from bringup.serve.protocol import Engine

log = get_logger("serve")


def plan_dict(engine: Engine) -> dict[str, Any]:
    return engine.plan.to_dict()


def profile_path_in_use(engine: Engine, given: Path | None) -> Path | None:
    """The profile the engine planned from: the one given, else the default for its device."""
    if given is not None:
        return Path(given)
    try:
        from bringup.backends.registry import device_info
        from bringup.profiles.store import default_profile_path

        return default_profile_path(device_info(engine.plan.device))
    except Exception as exc:  # introspection only: say nothing rather than fail the start-up
        log.debug("could not resolve the default profile path: %s", exc)
        return None


def profile_summary(path: Path | None) -> dict[str, Any] | None:
    """Which profile, for which device, which stages ran, and the headline counts of each section."""
    if path is None:
        return None
    try:
        from bringup.profiles.store import load_profile_or_none
    except ImportError:  # the profile store is not part of this build
        return {"path": str(path), "loaded": False, "reason": "profile store unavailable"}
    try:
        profile = load_profile_or_none(Path(path))
    except Exception as exc:  # a malformed profile is reported, not fatal for introspection
        return {"path": str(path), "loaded": False, "reason": str(exc)}
    if profile is None:
        return {"path": str(path), "loaded": False, "reason": "no profile at this path"}
    summary: dict[str, Any] = {"path": str(path), "loaded": True,
                               "schema": getattr(profile, "schema_version", None)}
    device = getattr(profile, "device", None)
    if device is not None:
        summary["device"] = {k: getattr(device, k, None) for k in ("id", "backend", "name", "arch")}
    stages = getattr(profile, "stages", {}) or {}
    summary["stages"] = {name: {"status": getattr(s, "status", None), "finished": getattr(s, "finished", None)}
                         for name, s in stages.items()}
    caps = getattr(profile, "capabilities", None)
    if caps is not None:
        counts: dict[str, dict[str, int]] = {}
        for group in ("dtypes", "attention", "compile", "features"):
            entries = getattr(caps, group, None) or {}
            counts[group] = dict(Counter(getattr(c, "status", "unknown") for c in entries.values()))
        summary["capabilities"] = counts
    ops = getattr(profile, "ops", None) or []
    if ops:
        summary["ops"] = dict(Counter(getattr(o, "status", "unknown") for o in ops))
    compiled = getattr(profile, "compiled", None) or []
    if compiled:
        summary["compiled"] = dict(Counter(getattr(c, "status", "unknown") for c in compiled))
    summary["bench"] = getattr(profile, "bench", None) is not None
    return summary
