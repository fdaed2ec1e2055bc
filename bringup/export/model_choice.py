"""Which model an export names, and which plan `bringup tune` recorded for it.

`--model` names a plan in the profile (its key, or the model's name) or a path (a plan tuned on that path is used).
Without it, the most recently tuned model the engine can load is taken. vLLM loads a Hugging Face directory,
llama-server a GGUF file: a plan tuned on the other kind, or on the built-in model, describes other weights and is not
used. A model that is neither a plan nor a path that exists is refused (one line, exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bringup.errors import BringupError
from bringup.export.config import ModelChoice, Note
from bringup.export.shell_words import hint, model_path
from bringup.export.tuned import TunedPlan
from bringup.profiles.schema import Profile
from bringup.terminal_text import quoted

Loads = Literal["directory", "gguf"]
BUILT_IN = "built-in"
LOADS_WHAT = {"directory": "a Hugging Face model directory", "gguf": "a GGUF file"}


@dataclass(frozen=True)
class Chosen:
    model: ModelChoice
    plan: TunedPlan | None
    notes: tuple[Note, ...] = ()


def kind_of(source: str) -> Loads | None:
    """What a recorded source is: a GGUF file, a directory, or None (the built-in model)."""
    if source == BUILT_IN:
        return None
    return "gguf" if source.lower().endswith(".gguf") else "directory"


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return False


def _what(plan: TunedPlan) -> str:
    kind = kind_of(plan.record.source)
    return "the built-in model" if kind is None else LOADS_WHAT[kind]


def _latest(plans: list[TunedPlan]) -> TunedPlan:
    return max(plans, key=lambda p: p.record.tuned)


def _plans(profile: Profile) -> list[TunedPlan]:
    return [TunedPlan(key, record) for key, record in (profile.models or {}).items()]


def _matching(profile: Profile, model: str) -> list[TunedPlan]:
    plans = _plans(profile)
    exact = [p for p in plans if p.key == model]
    return exact or [p for p in plans if p.record.model == model or
                     (p.record.source != BUILT_IN and _same_path(p.record.source, model))]


def _model_of(plan: TunedPlan) -> ModelChoice:
    path = model_path(plan.record.source, f"models[{quoted(plan.key)}].source")
    return ModelChoice(path, True, plan.key, plan.record.tuned)


def _chosen(plan: TunedPlan, others: list[TunedPlan]) -> Chosen:
    notes = ()
    if others:
        notes = (Note("tuned_plan", f"{len(others)} other plan(s) tuned for this model are not used: "
                                    f"{', '.join(p.key for p in others)}; pass --model KEY to take one of them",
                      tuple(f"models[{p.key}]: tuned {p.record.tuned}" for p in others)),)
    return Chosen(_model_of(plan), plan, notes)


def choose_model(profile: Profile, model: str | None, loads: Loads, engine: str, placeholder: str) -> Chosen:
    """The model the engine loads and its tuned plan; BringupError for a model that is not there or that this
    engine cannot load."""
    if model is None:
        return _implicit(profile, loads, placeholder)
    if not model.strip():
        raise BringupError(f"--model is empty: pass {LOADS_WHAT[loads]} or the key of a plan tuned in the profile")
    matches = _matching(profile, model)
    if matches:
        plan = _latest(matches)
        kind = kind_of(plan.record.source)
        if kind is None:
            raise BringupError(f"--model {quoted(model)}: its plan was tuned on bringup's built-in model, which only "
                               f"bringup can run; {engine} needs {LOADS_WHAT[loads]}: pass --model PATH")
        if kind != loads:
            raise BringupError(f"--model {quoted(model)}: its plan was tuned on {LOADS_WHAT[kind]} "
                               f"({quoted(plan.record.source)}), and {engine} loads {LOADS_WHAT[loads]}; tune that "
                               f"one (`bringup tune --model PATH`) and export it")
        return _chosen(plan, [p for p in matches if p is not plan])
    path = Path(model).expanduser()
    if not path.exists():
        tuned = ", ".join(p.key for p in _plans(profile)) or "none"
        raise BringupError(f"--model {quoted(model)}: no such file or directory, and no plan tuned under that name "
                           f"in the profile (tuned: {tuned}); pass {LOADS_WHAT[loads]} or a tuned plan's key")
    found: Loads | None = "directory" if path.is_dir() else "gguf" if path.suffix.lower() == ".gguf" else None
    if found != loads:
        raise BringupError(f"--model {quoted(model)}: {engine} loads {LOADS_WHAT[loads]}, and this is "
                           f"{'a directory' if path.is_dir() else 'not a .gguf file'}")
    path_word = model_path(model, "--model")
    note = Note("tuned_plan", f"no plan tuned for {model} in this profile: the settings a plan decides are "
                "left out", (), hint("bringup", "tune", "--model", path_word))
    return Chosen(ModelChoice(path_word, True), None, (note,))


def _implicit(profile: Profile, loads: Loads, placeholder: str) -> Chosen:
    plans = _plans(profile)
    usable = [p for p in plans if kind_of(p.record.source) == loads]
    if usable:
        plan = _latest(usable)
        rest = [p.key for p in usable if p is not plan]
        also = f" (also tuned: {', '.join(rest)}; pass --model KEY)" if rest else ""
        why = f"the most recently tuned model of the kind this engine loads{also}"
        return Chosen(_model_of(plan), plan, (Note("tuned_plan", f"no --model: {plan.key}, {why}",
                                                 (f"models[{plan.key}]: tuned {plan.record.tuned}, source "
                                                  f"{plan.record.source}",)),))
    skipped = [f"{p.key} ({_what(p)})" for p in plans]
    text = (f"no model: {placeholder} stands for {LOADS_WHAT[loads]}; the settings a tuned plan decides are left out"
            + (f" (the plans in this profile are for models this engine does not load: {', '.join(skipped)})"
               if skipped else ""))
    return Chosen(ModelChoice(placeholder, False), None,
                  (Note("tuned_plan", text, (), f"run `bringup tune --model MODEL` with {LOADS_WHAT[loads]}"),))
