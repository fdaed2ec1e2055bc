"""Every fallback is logged at WARNING, counted, and under --strict refused."""

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Literal

from bringup.errors import StrictFallbackError
from bringup.log import get_logger

FallbackLevel = Literal["op", "path", "global"]
LEVELS: tuple[FallbackLevel, ...] = ("op", "path", "global")

log = get_logger("fallback")


@dataclass
class FallbackEvent:
    level: FallbackLevel
    what: str
    wanted: str
    instead: str
    why: str

    def message(self) -> str:
        return f"fallback[{self.level}] {self.what}: wanted {self.wanted}, using {self.instead} because {self.why}"


@dataclass
class FallbackRecorder:
    strict: bool = False
    events: list[FallbackEvent] = field(default_factory=list)
    counts: Counter = field(default_factory=lambda: Counter({level: 0 for level in LEVELS}))

    def record(self, level: FallbackLevel, what: str, wanted: str, instead: str, why: str) -> None:
        if level not in LEVELS:
            raise ValueError(f"unknown fallback level {level!r}")
        event = FallbackEvent(level, what, wanted, instead, why)
        if self.strict:
            raise StrictFallbackError(f"{event.message()} (refused: --strict forbids fallbacks)")
        log.warning(event.message())
        self.events.append(event)
        self.counts[level] += 1

    def summary(self) -> dict:
        return {"counts": dict(self.counts), "events": [asdict(e) for e in self.events]}
