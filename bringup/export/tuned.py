"""The plan `bringup tune` recorded for a model (profile section `models`), read as data: the settings a launch
configuration takes from it (dtype, context length, batch limits, the KV cache it sized).

A record's values are read as the data tune wrote (numbers, names), never out of the text the plan table shows. A
record written before tune stored data (plan_format 1: its values are that text) still loads, replays at start-up and
shows its values, but gives no number here: each setting an export would take from it says so, with what to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.profiles.sections.models import PLAN_VALUES_AS_DATA, ModelPlanRecord

EVIDENCE_CHARS = 160


@dataclass(frozen=True)
class TunedPlan:
    key: str  # the record's key in the profile: `name [short hash]`
    record: ModelPlanRecord

    @property
    def dtype(self) -> str:
        return self.record.dtype

    @property
    def quantization(self) -> str:
        return self.record.quantization

    @property
    def as_text(self) -> bool:
        """Recorded by a bringup whose tune wrote the plan's values as text (plan_format 1)."""
        return self.record.plan_format < PLAN_VALUES_AS_DATA

    def value(self, setting: str) -> Any:
        """The setting's value as data; None when absent, or in a record of text (as_text)."""
        return self.record.value(setting)

    def number(self, setting: str) -> int | None:
        """A whole-number setting (max_model_len, max_num_seqs, max_num_batched_tokens, kv_blocks); None when
        absent or not a positive whole number."""
        value = self.value(setting)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    def kv_tokens(self) -> int | None:
        """Tokens the plan's KV cache holds: blocks × tokens per block."""
        blocks, size = self.number("kv_blocks"), self.record.block_size
        return blocks * size if blocks is not None and isinstance(size, int) and size > 0 else None

    def holds_no(self, what: str) -> str:
        """Why no `what` is taken from this plan: absent from it, or recorded as text by an older tune."""
        if self.as_text:
            return (f"{self.about()} records its plan as text, as bringup did before its tune records held values as "
                    f"data: {what} is not read from text")
        return f"{self.about()} holds no {what}"

    def line(self, setting: str) -> str:
        """The evidence line for one setting: `models[key].plan.setting: value (its evidence, shortened)`."""
        choice = self.record.plan.get(setting)
        where = f"models[{self.key}].plan.{setting}"
        if choice is None:
            return f"{where}: not recorded"
        evidence = " ".join(choice.evidence.split())
        if len(evidence) > EVIDENCE_CHARS:
            evidence = evidence[:EVIDENCE_CHARS - 3] + "..."
        return f"{where}: {self.record.shown(setting)} ({evidence})"

    def about(self) -> str:
        return f"the plan bringup tune recorded for {self.key} at {self.record.tuned}"
