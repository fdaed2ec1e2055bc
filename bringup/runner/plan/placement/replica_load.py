"""What replicas are predicted to gain, for a stated load, from each device's measured step costs (step_cost.py):
`requests` requests arrive at once, each a prompt of `prompt_tokens` tokens and `new_tokens` generated. A device
given k of them prefills their prompts, then decodes its batch of k for `new_tokens` steps; the devices run side by
side, so the load takes as long as the slowest device's share. The gain is the fastest device's time for the whole
load alone over the best split's time (every way of sharing the requests is tried)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.placement.step_cost import StepCost

REQUESTS = 8  # the stated load's concurrent requests (or --max-num-seqs where given)
PROMPT_TOKENS = 128  # each request's prompt, at most half the context
NEW_TOKENS = 128  # each request's generated tokens, at most what the context leaves


@dataclass(frozen=True)
class ReplicaLoad:
    requests: int
    prompt_tokens: int
    new_tokens: int

    @property
    def said(self) -> str:
        each = (f"a {self.prompt_tokens}-token prompt and {self.new_tokens} generated tokens")
        return f"{self.requests} requests at once, each {each}" if self.requests > 1 else f"1 request of {each}"


@dataclass(frozen=True)
class ReplicaGain:
    gain: float  # the fastest alone's time over the best split's
    shares: tuple[int, ...]  # requests per device in the best split, in the order given
    alone_s: float
    split_s: float
    fastest: int  # the index of the device that takes the whole load soonest


def stated_load(context_tokens: int, requests: int | None) -> ReplicaLoad:
    prompt = max(min(PROMPT_TOKENS, context_tokens // 2), 1)
    return ReplicaLoad(max(requests or REQUESTS, 1), prompt, max(min(NEW_TOKENS, context_tokens - prompt), 1))


def load_seconds(cost: StepCost, load: ReplicaLoad, share: int) -> float:
    """A device's time for `share` of the load's requests (0 for none)."""
    if share == 0:
        return 0.0
    return share * load.prompt_tokens * cost.prefill_s_per_token + load.new_tokens * cost.decode_s(share)


def replica_gain(costs: list[StepCost], load: ReplicaLoad) -> ReplicaGain:
    alone = [load_seconds(cost, load, load.requests) for cost in costs]
    fastest = min(range(len(costs)), key=alone.__getitem__)
    best = min(_shares(load.requests, len(costs)),
               key=lambda shares: max(load_seconds(c, load, k) for c, k in zip(costs, shares)))
    split = max(load_seconds(c, load, k) for c, k in zip(costs, best))
    return ReplicaGain(alone[fastest] / split if split > 0 else 1.0, best, alone[fastest], split, fastest)


def _shares(requests: int, devices: int) -> list[tuple[int, ...]]:
    """Every way of giving `requests` requests to `devices` devices."""
    if devices == 1:
        return [(requests,)]
    return [(k, *rest) for k in range(requests + 1) for rest in _shares(requests - k, devices - 1)]
