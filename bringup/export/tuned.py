"""The plan `bringup tune` recorded for a model (profile section `models`), read as numbers: the settings a launch
configuration takes from it (dtype, context length, batch limits, the KV cache it sized)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from bringup.errors import BringupError
from bringup.number_rule import NumberRefused, whole_number
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.terminal_text import quoted

# a plan row's value as the plan table writes it: "256", and the KV cache as "256 × 16 tokens"
KV_BLOCKS = re.compile(r"^\s*(\S+?)\s*[×x]\s*(\S+)\s*tokens\s*$")  # each number then read by the rule
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

    def value(self, setting: str) -> str | None:
        choice = self.record.plan.get(setting)
        return None if choice is None else str(choice.value)

    def number(self, setting: str) -> int | None:
        """A whole-number setting (max_model_len, max_num_seqs, max_num_batched_tokens); None when absent or not
        a number."""
        choice = self.record.plan.get(setting)
        return None if choice is None else self._checked(choice.value, setting) or None

    def kv_tokens(self) -> int | None:
        """Tokens the plan's KV cache holds: blocks × tokens per block."""
        found = KV_BLOCKS.match(self.value("kv_blocks") or "")
        if not found:
            return None
        tokens = self._checked(found.group(1), "kv_blocks") * self._checked(found.group(2), "kv_blocks")
        return self._checked(tokens, "kv_blocks") or None

    def _checked(self, value: object, setting: str) -> int:
        """The number rule (bringup/number_rule.py) on a plan value: BringupError naming the field and the bound."""
        try:
            return whole_number(value, f"models[{quoted(self.key)}].plan.{setting}", MAX_TOKENS)
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
        return f"{where}: {choice.value} ({evidence})"

    def about(self) -> str:
        return f"the plan bringup tune recorded for {self.key} at {self.record.tuned}"
