"""A device's step costs, for the replicas decision and the router's predicted completion: a decode step of b
sequences takes base_s + per_seq_s * b (two measured points: batch 1 and a full batch), or, where decode steps were
timed at each batch (`decode_steps`), the measured step at b, interpolated between timed batches; and a prompt's
prefill takes prefill_s_per_token for each of its tokens (a measured prefill). A decode step streams the weights
once whatever the batch, so where per_seq_s is small next to base_s a full batch on the fastest device beats
splitting it; where the step grows with the batch, or prompts' prefill is a real share of the work, a slower
replica pays. The step is not always a line in the batch: host kernels that run 2 or 3 rows slower than 4, or
graphs that pad a batch to their bucket, put steps above or below the line through batch 1 and a full batch (on a
2-core EPYC an emulated device's batch-3 step took 1.1-1.3 s where that line said 753 ms), so the router, which
predicts at the batch a request joins, reads the timed steps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepCost:
    base_s: float
    per_seq_s: float
    prefill_s_per_token: float
    evidence: str
    decode_steps: tuple[tuple[int, float], ...] = ()  # (batch, seconds) timed, by rising batch

    def decode_s(self, batch: int) -> float:
        """A decode step of `batch` sequences: the timed steps interpolated (the largest's plus per_seq_s for each
        sequence beyond it), else the line."""
        if not self.decode_steps:
            return self.base_s + self.per_seq_s * batch
        low_batch, low_s = self.decode_steps[0]
        if batch <= low_batch:
            return low_s
        for high_batch, high_s in self.decode_steps[1:]:
            if batch <= high_batch:
                return low_s + (high_s - low_s) * (batch - low_batch) / (high_batch - low_batch)
            low_batch, low_s = high_batch, high_s
        return low_s + self.per_seq_s * (batch - low_batch)

    def added_s(self, batch: int) -> float:
        """What one more sequence adds to a decode step of `batch` sequences (never below nothing: a batch the
        timing found faster than a smaller one does not make the router believe an arrival speeds the others)."""
        return max(self.decode_s(batch + 1) - self.decode_s(batch), 0.0)

    def as_value(self) -> dict[str, Any]:
        value: dict[str, Any] = {"base_s": self.base_s, "per_seq_s": self.per_seq_s,
                                 "prefill_s_per_token": self.prefill_s_per_token, "evidence": self.evidence}
        if self.decode_steps:
            value["decode_steps"] = {str(batch): seconds for batch, seconds in self.decode_steps}
        return value


def step_cost_from(value: dict[str, Any]) -> StepCost:
    """The cost a placement row holds (`as_value`), for the router."""
    steps = tuple(sorted((int(batch), float(s)) for batch, s in dict(value.get("decode_steps") or {}).items()))
    return StepCost(float(value["base_s"]), float(value["per_seq_s"]), float(value["prefill_s_per_token"]),
                    str(value["evidence"]), steps)


def measured_cost(one_s: float, full_s: float, full_batch: int, prefill_s: float, prompt_tokens: int,
                  how: str = "") -> StepCost:
    """From a decode step timed at batch 1 (`one_s`) and at `full_batch` (`full_s`), and a prefill of
    `prompt_tokens` tokens timed at `prefill_s`; `how`: what was timed, for the evidence."""
    per_seq = max(full_s - one_s, 0.0) / max(full_batch - 1, 1)
    prefill = prefill_s / max(prompt_tokens, 1)
    evidence = (f"decode step {one_s * 1e3:.0f} ms at batch 1, {full_s * 1e3:.0f} ms at batch {full_batch}; "
                f"prefill {prefill * 1e3:.2f} ms a token ({prompt_tokens} tokens timed)") + (f" {how}" if how else "")
    return StepCost(one_s - per_seq, per_seq, prefill, evidence)


def tabled_cost(steps: dict[int, float], prefill_s: float, prompt_tokens: int, how: str = "") -> StepCost:
    """From decode steps timed at each batch in `steps` (batch 1 among them) and a prefill of `prompt_tokens`
    tokens timed at `prefill_s`: the line through batch 1 and the largest, and the timed steps themselves."""
    largest = max(steps)
    line = measured_cost(steps[1], steps[largest], largest, prefill_s, prompt_tokens)
    timed = ", ".join(f"{batch}: {seconds * 1e3:.0f}" for batch, seconds in sorted(steps.items()))
    evidence = (f"decode step ms by batch {timed}; prefill {line.prefill_s_per_token * 1e3:.2f} ms a token "
                f"({prompt_tokens} tokens timed)") + (f" {how}" if how else "")
    return StepCost(line.base_s, line.per_seq_s, line.prefill_s_per_token, evidence, tuple(sorted(steps.items())))
