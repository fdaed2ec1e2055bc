"""The start-up decisions measured after the plan is followed — the graphs' replay against eager, the prefill
chunk's step times, the attention check's numbers, a prompt through the fused prompt layers and the modules — as a
tune record stores them and as a replay gives them back. A record without them (tuned before they were kept) gives
None, and start-up measures them."""

from __future__ import annotations

from typing import Any

from bringup.profiles.sections.models import (
    AttentionCheckRecord,
    CandidateRecord,
    MixedRecord,
    ModelPlanRecord,
    PrefillRecord,
    PromptRecord,
)
from bringup.runner.plan.attention_timings import AttentionTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.mixed_steps import MixedTimings
from bringup.runner.plan.prefill_chunk import PrefillTimings
from bringup.runner.plan.prompt_layers import PromptTimings


def recorded_fields(measured: StartupMeasurements) -> dict[str, Any]:
    """ModelPlanRecord's fields for these decisions."""
    graph = measured.graph_decode
    prefill, attention, prompt, mixed = measured.prefill, measured.attention, measured.prompt, measured.mixed
    return {
        "graph_decode": None if graph is None else CandidateRecord(candidate_s=graph[0], plain_s=graph[1],
                                                                   spread=graph[2]),
        "prefill": None if prefill is None else PrefillRecord(
            decode_step=prefill.decode_step, by_tokens=dict(prefill.by_tokens), how=prefill.how,
            context=prefill.context, at_context=dict(prefill.at_context), with_decode=True, decodes=prefill.decodes,
            decodes_step=prefill.decodes_step),
        "attention_check": None if attention is None else AttentionCheckRecord(
            plain_error=attention.plain_error, plain_s=attention.plain_s, errors=dict(attention.errors),
            seconds=dict(attention.seconds), cannot_run=dict(attention.cannot_run), tokens=attention.tokens),
        "prompt": None if prompt is None else PromptRecord(tokens=prompt.tokens, kernels=list(prompt.kernels),
                                                           modules=list(prompt.modules)),
        "mixed": None if mixed is None else MixedRecord(
            decodes=mixed.decodes, tokens=mixed.tokens, one={c: list(r) for c, r in mixed.one.items()},
            two={c: list(r) for c, r in mixed.two.items()}),
    }


def replayed_fields(record: ModelPlanRecord) -> dict[str, Any]:
    """StartupMeasurements' fields for these decisions, from the record."""
    graph, prefill, attention, prompt = record.graph_decode, record.prefill, record.attention_check, record.prompt
    return {
        "graph_decode": None if graph is None else (graph.candidate_s, graph.plain_s, graph.spread),
        "prefill": None if prefill is None else PrefillTimings(
            prefill.decode_step, dict(prefill.by_tokens), prefill.how, prefill.context, dict(prefill.at_context),
            prefill.decodes, prefill.decodes_step),
        "attention": None if attention is None else AttentionTimings(
            attention.plain_error, attention.plain_s, dict(attention.errors), dict(attention.seconds),
            dict(attention.cannot_run), attention.tokens),
        "prompt": None if prompt is None else PromptTimings(prompt.tokens, list(prompt.kernels), list(prompt.modules)),
        "mixed": None if record.mixed is None else MixedTimings(
            record.mixed.decodes, record.mixed.tokens, {c: list(r) for c, r in record.mixed.one.items()},
            {c: list(r) for c, r in record.mixed.two.items()}),
    }
