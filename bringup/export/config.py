"""What an export gives: one engine's command line and environment, each setting with its reason and evidence, the
settings left out with why, and notes that are no flag (which GGUF types have verified kernels)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["flag", "env"]


@dataclass(frozen=True)
class Setting:
    """A flag (`--dtype bfloat16`, or a bare `--enforce-eager`: value None) or an environment variable."""

    kind: Kind
    name: str
    value: str | None
    reason: str
    evidence: tuple[str, ...] = ()


@dataclass(frozen=True)
class Omitted:
    """A flag or variable left out: the evidence is missing or negative (or it is not needed), and what to run to
    get the evidence, when a bringup stage can."""

    kind: Kind
    name: str
    reason: str
    evidence: tuple[str, ...] = ()
    to_get: str | None = None


@dataclass(frozen=True)
class Note:
    """A statement beside the command line, e.g. which GGUF quantization types the device verified."""

    topic: str
    text: str
    evidence: tuple[str, ...] = ()
    to_get: str | None = None


@dataclass(frozen=True)
class ModelChoice:
    """What the engine is told to load, and the plan `bringup tune` recorded for it (its key), if any."""

    path: str  # a placeholder when no model is known (`given` False)
    given: bool
    tuned: str | None = None
    tuned_at: str | None = None


@dataclass(frozen=True)
class EngineConfig:
    engine: str  # "vllm" | "llama.cpp"
    engine_version: str  # the release whose flags these were checked against
    device: str  # "cpu (AMD EPYC)", as the profile names it
    command: tuple[str, ...]  # the program, before the model: ("llama-server",)
    model_flag: str  # how the command names the model: --model, -m
    model: ModelChoice
    settings: tuple[Setting, ...] = ()
    omitted: tuple[Omitted, ...] = ()
    notes: tuple[Note, ...] = field(default_factory=tuple)

    @property
    def flags(self) -> tuple[Setting, ...]:
        return tuple(s for s in self.settings if s.kind == "flag")

    @property
    def argv(self) -> list[str]:
        """The command line: the program, the model, then every flag (a bare flag has no value)."""
        args = [*self.command, self.model_flag, self.model.path]
        for flag in self.flags:
            args += [flag.name] if flag.value is None else [flag.name, flag.value]
        return args

    @property
    def environment(self) -> dict[str, str]:
        return {s.name: s.value or "" for s in self.settings if s.kind == "env"}

    def setting(self, name: str) -> Setting | None:
        return next((s for s in self.settings if s.name == name), None)

    def left_out(self, name: str) -> Omitted | None:
        return next((o for o in self.omitted if o.name == name), None)
