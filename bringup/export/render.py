"""An EngineConfig as text (the command to paste, then each setting with its reason and evidence, each one left out
with why) and as the `bringup.export/v1` document. Strings from the profile are not escaped here: the terminal,
the report and JSON each escape them their own way."""

from __future__ import annotations

import shlex
from dataclasses import asdict
from typing import Any

from bringup.export.config import EngineConfig


def shell_line(config: EngineConfig) -> str:
    """One line to paste into a POSIX shell: the variables, then the command."""
    env = [f"{name}={shlex.quote(value)}" for name, value in config.environment.items()]
    return " ".join([*env, *(shlex.quote(arg) for arg in config.argv)])


def _shown(name: str, value: str | None) -> str:
    return name if value is None else f"{name} {value}" if name.startswith("-") else f"{name}={value}"


def summary_lines(config: EngineConfig) -> list[str]:
    """The header and the command: what a report's "deploy with" section shows first."""
    model = config.model
    tuned = f" (plan tuned by bringup tune: {model.tuned}, {model.tuned_at})" if model.tuned else ""
    return [f"{config.engine} for {config.device}, flags as {config.engine_version} spells them",
            f"model: {model.path}{'' if model.given else ' (placeholder)'}{tuned}",
            "", f"  {shell_line(config)}"]


def setting_lines(config: EngineConfig, evidence: bool = True) -> list[str]:
    """Each setting with its reason (and, with `evidence`, the profile entries it rests on)."""
    lines = []
    for s in config.settings:
        lines.append(f"  {_shown(s.name, s.value)}: {s.reason}")
        lines += [f"      from {e}" for e in s.evidence] if evidence else []
    return lines


def omitted_lines(config: EngineConfig, evidence: bool = False) -> list[str]:
    lines = []
    for o in config.omitted:
        get = f" — to get it: {o.to_get}" if o.to_get else ""
        lines.append(f"  {o.name}: {o.reason}{get}")
        lines += [f"      from {e}" for e in o.evidence] if evidence else []
    return lines


def note_lines(config: EngineConfig) -> list[str]:
    return [f"  {n.text}" + (f" — {n.to_get}" if n.to_get else "") for n in config.notes]


def text_lines(config: EngineConfig, evidence: bool = True) -> list[str]:
    """The whole text: summary, set, left out, notes."""
    lines = summary_lines(config)
    for title, body in (("set", setting_lines(config, evidence)), ("left out", omitted_lines(config, evidence)),
                        ("notes", note_lines(config))):
        if body:
            lines += ["", f"{title}:", *body]
    return lines


def to_document(config: EngineConfig) -> dict[str, Any]:
    """The `bringup.export/v1` document's fields (print_json adds `schema`)."""
    return {
        "engine": config.engine,
        "engine_version": config.engine_version,
        "device": config.device,
        "model": {"path": config.model.path, "given": config.model.given, "tuned": config.model.tuned,
                  "tuned_at": config.model.tuned_at},
        "argv": config.argv,
        "environment": config.environment,
        "shell": shell_line(config),
        "items": [{**asdict(s), "evidence": list(s.evidence)} for s in config.settings],
        "omitted": [{**asdict(o), "evidence": list(o.evidence)} for o in config.omitted],
        "notes": [{**asdict(n), "evidence": list(n.evidence)} for n in config.notes],
    }
