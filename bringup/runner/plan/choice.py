"""One setting of the execution plan: the value chosen and the evidence that chose it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Choice:
    value: Any
    evidence: str
