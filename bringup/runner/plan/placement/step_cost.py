"""A device's step costs, for the replicas decision and the router's predicted completion: a decode step of b
sequences takes base_s + per_seq_s * b (two measured points: batch 1 and a full batch), and a prompt's prefill takes
prefill_s_per_token for each of its tokens (a measured prefill). A decode step streams the weights once whatever
the batch, so where per_seq_s is small next to base_s a full batch on the fastest device beats splitting it; where
the step grows with the batch, or prompts' prefill is a real share of the work, a slower replica pays."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepCost:
    base_s: float
    per_seq_s: float
    prefill_s_per_token: float
    evidence: str

    def decode_s(self, batch: int) -> float:
        return self.base_s + self.per_seq_s * batch

    def as_value(self) -> dict[str, Any]:
        return {"base_s": self.base_s, "per_seq_s": self.per_seq_s, "prefill_s_per_token": self.prefill_s_per_token,
                "evidence": self.evidence}


def step_cost_from(value: dict[str, Any]) -> StepCost:
    """The cost a placement row holds (`as_value`), for the router."""
    return StepCost(float(value["base_s"]), float(value["per_seq_s"]), float(value["prefill_s_per_token"]),
                    str(value["evidence"]))


def measured_cost(one_s: float, full_s: float, full_batch: int, prefill_s: float, prompt_tokens: int,
                  how: str = "") -> StepCost:
    """From a decode step timed at batch 1 (`one_s`) and at `full_batch` (`full_s`), and a prefill of
    `prompt_tokens` tokens timed at `prefill_s`; `how`: what was timed, for the evidence."""
    per_seq = max(full_s - one_s, 0.0) / max(full_batch - 1, 1)
    prefill = prefill_s / max(prompt_tokens, 1)
    evidence = (f"decode step {one_s * 1e3:.0f} ms at batch 1, {full_s * 1e3:.0f} ms at batch {full_batch}; "
                f"prefill {prefill * 1e3:.2f} ms a token ({prompt_tokens} tokens timed)") + (f" {how}" if how else "")
    return StepCost(one_s - per_seq, per_seq, prefill, evidence)
