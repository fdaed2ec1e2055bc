"""What replicas are predicted to gain, for a stated load, from each device's measured step costs (step_cost.py):
`requests` requests in flight throughout (a server's concurrency: each one that ends is replaced by the next), each
a prompt of `prompt_tokens` tokens and `new_tokens` generated. A device holding k of them completes k requests in
the time it takes to prefill k prompts and run `new_tokens` decode steps of its batch of k (its steady rate); the
devices run side by side, so their rates add. The gain is the best shares' summed rate (every way of sharing the
requests tried) over the fastest device's holding them all: the most replicas can give at that concurrency. The
router (engine/replicas/router.py) places each request by completion time, which reaches shares near the best (the
optimum is flat) with each request's completion balanced across the devices."""

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
        return (f"{self.requests} requests in flight, each {each}" if self.requests > 1
                else f"1 request at a time, of {each}")


@dataclass(frozen=True)
class ReplicaGain:
    gain: float  # the best shares' requests a second over the fastest alone's
    shares: tuple[int, ...]  # requests in flight on each device at the best shares, in the order given
    alone_rate: float  # requests a second, the fastest device holding every request
    split_rate: float  # requests a second, the devices at the best shares
    fastest: int  # the index of the device that completes the whole load fastest


def stated_load(context_tokens: int, requests: int | None) -> ReplicaLoad:
    prompt = max(min(PROMPT_TOKENS, context_tokens // 2), 1)
    return ReplicaLoad(max(requests or REQUESTS, 1), prompt, max(min(NEW_TOKENS, context_tokens - prompt), 1))


def load_seconds(cost: StepCost, load: ReplicaLoad, share: int) -> float:
    """A device's time to prefill `share` of the load's requests and decode them together to their end (0 for
    none)."""
    if share == 0:
        return 0.0
    return share * load.prompt_tokens * cost.prefill_s_per_token + load.new_tokens * cost.decode_s(share)


def steady_rate(cost: StepCost, load: ReplicaLoad, in_flight: int) -> float:
    """Requests a second a device completes with `in_flight` requests of the load's shape on it at all times (each
    finished one replaced at once): each takes its prompt's prefill, and a decode step of the whole batch serves one
    token of each. It rises with the batch, by less for each request added."""
    return in_flight / load_seconds(cost, load, in_flight) if in_flight > 0 else 0.0


def replica_gain(costs: list[StepCost], load: ReplicaLoad) -> ReplicaGain:
    alone = [steady_rate(cost, load, load.requests) for cost in costs]
    fastest = max(range(len(costs)), key=alone.__getitem__)

    def summed(shares: tuple[int, ...]) -> float:
        return sum(steady_rate(cost, load, k) for cost, k in zip(costs, shares))
    best = max(_shares(load.requests, len(costs)), key=summed)
    return ReplicaGain(summed(best) / alone[fastest] if alone[fastest] > 0 else 1.0, best, alone[fastest],
                       summed(best), fastest)


def _shares(requests: int, devices: int) -> list[tuple[int, ...]]:
    """Every way of giving `requests` requests to `devices` devices."""
    if devices == 1:
        return [(requests,)]
    return [(k, *rest) for k in range(requests + 1) for rest in _shares(requests - k, devices - 1)]
