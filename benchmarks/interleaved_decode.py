"""Batch-1 decode of several engines with their steps interleaved, so each sees the same machine.

On a shared VM the memory bandwidth drifts by several percent within seconds, more than two identical plans
differ: timing one engine and then the other measures the drift. Here every engine decodes one request and
the engines take one decode step each in turn (the order reversed every step), so all of them stream their
weights through the same moments. An engine built twice from the same inputs is the control: its ratio to the
first copy is the noise of the comparison itself, printed beside the ratio it qualifies.
"""

from __future__ import annotations

import statistics
import time

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.sampling_params import SamplingParams


def interleaved_rates(engines: dict[str, LLMEngine], prompt: list[int], new_tokens: int) -> dict[str, float]:
    """Decode tokens/s of each engine (prefill excluded), their decode steps taken in turn."""
    params = SamplingParams(max_tokens=new_tokens, temperature=0.0, ignore_eos=True)
    spent, steps = dict.fromkeys(engines, 0.0), dict.fromkeys(engines, 0)
    for engine in engines.values():
        engine.add_request("interleaved", prompt, params)
        engine.step()  # prefill and the first token
    order = list(engines)
    while any(engine.has_unfinished() for engine in engines.values()):
        for label in order:
            engine = engines[label]
            if engine.has_unfinished():
                begin = time.perf_counter()
                engine.step()
                spent[label] += time.perf_counter() - begin
                steps[label] += 1
        order.reverse()
    return {label: steps[label] / spent[label] for label in engines}


def paired_ratios(engines: dict[str, LLMEngine], prompt: list[int], new_tokens: int, rounds: int,
                  baseline: str) -> dict[str, dict]:
    """For each engine but `baseline`: the median over `rounds` of its interleaved decode rate ÷ the baseline's,
    every round's ratio, and the engine's best rate."""
    per_round = [interleaved_rates(engines, prompt, new_tokens) for _ in range(rounds)]
    out: dict[str, dict] = {}
    for label in engines:
        ratios = [r[label] / r[baseline] for r in per_round]
        out[label] = {"decode_tok_s": max(r[label] for r in per_round), "ratio": statistics.median(ratios),
                      "ratios": ratios}
    return out
