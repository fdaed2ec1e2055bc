"""Tune's runs of the late start-up decisions (graphs, prefill chunk, attention check, prompt layers) combined as
tune_runs.py combines the others: the fastest of each timing across the runs that took it, the noise across them,
and the largest error any run measured (a check's error is not noise to take the best of)."""

from __future__ import annotations

from typing import Any

from bringup.runner.plan.attention_timings import AttentionTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.mixed_steps import MixedTimings
from bringup.runner.plan.noise import floor_noise
from bringup.runner.plan.prefill_chunk import PrefillTimings
from bringup.runner.plan.prompt_layers import PromptTimings


def combine_late(runs: list[StartupMeasurements], noise: dict[str, float]) -> dict[str, Any]:
    """StartupMeasurements' fields for these decisions; a decision some run did not measure is left unmeasured."""
    graphs = [r.graph_decode for r in runs]
    prefill = [r.prefill for r in runs]
    attention = [r.attention for r in runs]
    prompt = [r.prompt for r in runs]
    mixed = [r.mixed for r in runs]
    return {
        "graph_decode": None if None in graphs else _graphs([g for g in graphs if g is not None], noise),
        "prefill": None if None in prefill else _prefill([p for p in prefill if p is not None], noise),
        "attention": None if None in attention else _attention([a for a in attention if a is not None]),
        "prompt": None if None in prompt else _prompt([p for p in prompt if p is not None], noise),
        "mixed": None if None in mixed else _mixed([m for m in mixed if m is not None], noise),
    }


def _graphs(runs: list[tuple[float, float, float]], noise: dict[str, float]) -> tuple[float, float, float]:
    across = max(floor_noise([c for c, _, _ in runs]), floor_noise([p for _, p, _ in runs]))
    noise["graphs"] = across
    return min(c for c, _, _ in runs), min(p for _, p, _ in runs), max([across, *(s for _, _, s in runs)])


def _prefill(runs: list[PrefillTimings], noise: dict[str, float]) -> PrefillTimings:
    sizes = sorted({n for r in runs for n in r.by_tokens})
    by_tokens = {n: min(r.by_tokens[n] for r in runs if n in r.by_tokens) for n in sizes}
    noise["prefill decode step"] = floor_noise([r.decode_step for r in runs])
    how = f"fastest of {len(runs)} start-up runs, each {runs[0].how}" if len(runs) > 1 else runs[0].how
    context = min(r.context for r in runs)  # each run's context is the same where the plan is
    at_context = {n: min(r.at_context[n] for r in runs if n in r.at_context) for n in by_tokens
                  if context and all(n in r.at_context for r in runs)}
    decodes = min(r.decodes for r in runs)  # the same batch where the plan is
    decodes_step = min((r.decodes_step for r in runs if r.decodes == decodes), default=0.0)
    return PrefillTimings(min(r.decode_step for r in runs), by_tokens, how, context if at_context else 0, at_context,
                          decodes, decodes_step)


def _attention(runs: list[AttentionTimings]) -> AttentionTimings:
    names = list(dict.fromkeys(n for r in runs for n in r.errors))
    timed = list(dict.fromkeys(n for r in runs for n in r.seconds))
    return AttentionTimings(
        plain_error=max(r.plain_error for r in runs), plain_s=min(r.plain_s for r in runs),
        errors={n: max(r.errors[n] for r in runs if n in r.errors) for n in names},
        seconds={n: min(r.seconds[n] for r in runs if n in r.seconds) for n in timed},
        cannot_run={n: why for r in runs for n, why in r.cannot_run.items()}, tokens=runs[0].tokens)


def _prompt(runs: list[PromptTimings], noise: dict[str, float]) -> PromptTimings:
    """Each run's fastest of each path, so the choice takes the fastest of all and the noise across the runs."""
    kernels, modules = [min(r.kernels) for r in runs], [min(r.modules) for r in runs]
    noise["prompt layers"] = max(floor_noise(kernels), floor_noise(modules))
    return PromptTimings(min(r.tokens for r in runs), kernels, modules)


def _mixed(runs: list[MixedTimings], noise: dict[str, float]) -> MixedTimings | None:
    """Each run's fastest of each side at each context (the contexts and step every run timed; None if they differ:
    the cache held the decodes at another context)."""
    first = runs[0]
    if any((r.decodes, r.tokens, sorted(r.one)) != (first.decodes, first.tokens, sorted(first.one)) for r in runs):
        return None
    one = {c: [min(r.one[c]) for r in runs] for c in first.one}
    two = {c: [min(r.two[c]) for r in runs] for c in first.one}
    noise["mixed steps"] = max(floor_noise(seconds) for side in (one, two) for seconds in side.values())
    return MixedTimings(first.decodes, first.tokens, one, two)
