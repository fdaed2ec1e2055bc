"""The engines an export knows, and the entry point: a profile and an engine name in, an EngineConfig out."""

from __future__ import annotations

from typing import Any

from bringup.errors import BringupError
from bringup.export import llama_cpp, vllm
from bringup.export.config import EngineConfig, Omitted, Setting
from bringup.export.engine_spec import EngineSpec, ExportInputs
from bringup.export.evidence import served_dtype
from bringup.export.model_choice import choose_model
from bringup.export.placement import llama_cpp_items, vllm_items
from bringup.profiles.schema import Profile
from bringup.terminal_text import quoted

ENGINES: dict[str, EngineSpec] = {spec.name: spec for spec in (vllm.ENGINE, llama_cpp.ENGINE)}
ENGINE_NAMES = tuple(ENGINES)
PLACEMENT_ITEMS = {vllm.ENGINE.name: vllm_items, llama_cpp.ENGINE.name: llama_cpp_items}


def engine_spec(engine: str | None) -> EngineSpec:
    """The engine --engine names; BringupError (one line, exit 2) for anything else."""
    if engine is None or not engine.strip():
        raise BringupError(f"--engine is required: one of {', '.join(ENGINE_NAMES)}")
    spec = ENGINES.get(engine.strip().lower())
    if spec is None:
        raise BringupError(f"--engine {quoted(engine)} is not an engine export knows; use one of "
                           f"{', '.join(ENGINE_NAMES)}")
    return spec


def export_config(profile: Profile, engine: str, model: str | None = None,
                  placement: dict[str, Any] | None = None) -> EngineConfig:
    """`engine`'s launch configuration from `profile`'s evidence, for `model` (a path or a tuned plan's key; None:
    the most recently tuned model the engine loads). BringupError for an unknown engine or a model not there.
    `placement` (the plan's placement row, export/placement.py): its settings replace the profile's of the same
    name."""
    spec = engine_spec(engine)
    chosen = choose_model(profile, model, spec.loads, spec.title, spec.placeholder)
    inputs = ExportInputs(profile, chosen.model, chosen.plan, served_dtype(profile, chosen.plan))
    found = spec.items(inputs)
    if placement is not None:
        placed = PLACEMENT_ITEMS[spec.name](placement)
        names = {item.name for item in placed}
        found = [item for item in found if item.name not in names] + placed
    device = profile.device
    return EngineConfig(
        engine=spec.name, engine_version=spec.version,
        device=f"{device.id} ({device.name})" if device else "no device section",
        command=spec.command, model_flag=spec.model_flag, model=chosen.model,
        settings=tuple(i for i in found if isinstance(i, Setting)),
        omitted=tuple(i for i in found if isinstance(i, Omitted)),
        notes=(*chosen.notes, *spec.notes(inputs)))
