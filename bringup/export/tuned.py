"""The plan `bringup tune` recorded for a model (profile section `models`), read as data: the settings a launch
configuration takes from it (dtype, context length, batch limits, the KV cache it sized).

A record's values are read as the data tune wrote (numbers, names), never out of the text the plan table shows. A
record written before tune stored data (plan_format 1: its values are that text) still loads, replays at start-up and
shows its values, but gives no number here: each setting an export would take from it says so, with what to run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.errors import BringupError
from bringup.number_rule import NumberRefused, whole_number
from bringup.profiles.sections.models import PLAN_VALUES_AS_DATA, ModelPlanRecord
from bringup.terminal_text import quoted

MAX_TOKENS = (1 << 31) - 1  # a token count or position: what an engine's int32 positions can index
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
        """A whole-number setting (max_model_len, max_num_seqs, max_num_batched_tokens, kv_blocks) read by the number
        rule; None when absent, or in a record of text (as_text)."""
        value = self.value(setting)
        return None if value is None else self._checked(value, setting) or None

    def kv_tokens(self) -> int | None:
        """Tokens the plan's KV cache holds: blocks × tokens per block."""
        blocks = self.number("kv_blocks")
        if blocks is None or self.record.block_size is None:
            return None
        size = self._checked(self.record.block_size, "block_size")
        return self._checked(blocks * size, "kv_blocks") or None

    def holds_no(self, what: str) -> str:
        """Why no `what` is taken from this plan: absent from it, or recorded as text by an older tune."""
        if self.as_text:
            return (f"{self.about()} records its plan as text, as bringup did before its tune records held values as "
                    f"data: {what} is not read from text")
        return f"{self.about()} holds no {what}"

    def _checked(self, value: object, setting: str) -> int:
        """The number rule (bringup/number_rule.py) on a plan value: BringupError naming the field and the bound."""
        try:
            return whole_number(value, f"models[{quoted(self.key)}].plan.{setting}", MAX_TOKENS, strings=False)
        except NumberRefused as exc:
            raise BringupError(f"{exc}; run `bringup tune` again, or fix the profile") from None

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
