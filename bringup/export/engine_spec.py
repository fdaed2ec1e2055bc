"""What an engine mapping declares (its pinned version, command, what model it loads) and what it is given."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from bringup.export.config import ModelChoice, Note, Omitted, Setting
from bringup.export.evidence import Fact
from bringup.export.model_choice import Loads
from bringup.export.shell_words import hint
from bringup.export.tuned import TunedPlan
from bringup.profiles.schema import Profile

Item = Setting | Omitted


@dataclass(frozen=True)
class ExportInputs:
    profile: Profile
    model: ModelChoice
    plan: TunedPlan | None
    dtype: Fact  # the dtype served (evidence.served_dtype); both engines read it

    def tune_hint(self, more: str = "") -> str:
        return hint("bringup", "tune", "--model", self.model.path if self.model.given else "MODEL", *more.split())


@dataclass(frozen=True)
class EngineSpec:
    name: str  # what --engine takes
    title: str  # how text names it
    version: str  # the release whose flags the mapping was checked against
    command: tuple[str, ...]
    model_flag: str
    loads: Loads
    placeholder: str  # the model path shown when no model is known
    items: Callable[[ExportInputs], list[Item]]
    notes: Callable[[ExportInputs], list[Note]]
