"""A replica's pace: its steps' measured time over what its step costs predict for the work those steps did.

The step costs (plan/placement/step_cost.py) are floors timed in a few seconds on each loaded engine after the start
(engine_costs.py), the replicas in turn; a noisy start or a host that slows later leaves one device's costs low, and
the router, which places each request by predicted completion, then sends that device more than its share. So each
replica measures its own steps while it serves, and the router scales the replica's predictions by the ratio: the
costs keep the shape (prefill against decode, batch against batch), the pace their level."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.placement.step_cost import StepCost

DECAY = 0.9  # each step's weight over the one before it: the pace follows the last ten or so steps
# the pace is held within these bounds of the start's costs: a stall (a device paused, a swap storm) slows the
# requests there but does not take the replica out of routing, and no replica is trusted far beyond its measurement
SLOWEST, FASTEST = 4.0, 0.5


@dataclass
class Pace:
    measured_s: float = 0.0  # decayed sum of the steps' seconds
    predicted_s: float = 0.0  # decayed sum of what the costs predicted for them
    steps: int = 0

    def add(self, measured_s: float, predicted_s: float) -> None:
        self.measured_s = DECAY * self.measured_s + measured_s
        self.predicted_s = DECAY * self.predicted_s + predicted_s
        self.steps += 1

    @property
    def factor(self) -> float:
        """Measured over predicted, within [FASTEST, SLOWEST]; 1.0 until a step's work was predicted."""
        if self.predicted_s <= 0.0:
            return 1.0
        return min(max(self.measured_s / self.predicted_s, FASTEST), SLOWEST)


def predicted_step_s(cost: StepCost, prefilled_tokens: int, decoded: int) -> float:
    """What `cost` predicts for a step that finished prompts of `prefilled_tokens` tokens in all and gave `decoded`
    running requests a token each (a prompt prefilled in chunks is counted at the step that finished it: the pace
    sums over steps, so the earlier chunks' time meets its prediction there)."""
    decode = cost.decode_s(decoded) if decoded else 0.0
    return prefilled_tokens * cost.prefill_s_per_token + decode
