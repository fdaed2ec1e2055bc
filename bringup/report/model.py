"""A profile (and optionally its baseline) turned into plain report data that the HTML and Markdown writers share."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.profiles.schema import Profile
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.verdict import Verdict, verdict_of
from bringup.report.baseline import BaselineComparison, compare_to_baseline
from bringup.report.sections.bench_tables import BenchTable, bench_tables
from bringup.report.sections.capabilities import CapabilityRow, capability_rows
from bringup.report.sections.compiled import CompiledRow, compiled_rows
from bringup.report.sections.deploy import DeployView, deploy_views
from bringup.report.sections.evals import EvalRow, eval_rows
from bringup.report.sections.identity import Fact, device_facts, environment_facts, stage_facts
from bringup.report.sections.ops_matrix import OpMatrix, op_matrix
from bringup.report.sections.plan import PlanView, plan_view
from bringup.report.sections.roofline import Roofline, roofline
from bringup.report.sections.runs import (
    CollectivesView,
    FallbackRow,
    collectives_view,
    fallback_rows,
    selftest_facts,
    soak_facts,
)
from bringup.report.sections.speed_card import SpeedCard, speed_card


@dataclass
class Report:
    title: str
    source: str  # the profile's path as given
    device: list[Fact]
    environment: list[Fact]
    stages: list[Fact]
    capabilities: list[CapabilityRow]
    ops: OpMatrix
    compiled: list[CompiledRow]
    roofline: Roofline
    bench: list[BenchTable]
    plan: PlanView
    fallbacks: list[FallbackRow]
    selftest: list[Fact]
    collectives: CollectivesView | None
    verdict: Verdict = field(default_factory=lambda: Verdict([]))
    speed: SpeedCard | None = None
    baseline: BaselineComparison | None = None
    notes: list[str] = field(default_factory=list)
    soak: list[Fact] = field(default_factory=list)
    evals: list[EvalRow] = field(default_factory=list)
    deploy: list[DeployView] = field(default_factory=list)
    graph_replay: list[GraphReplayRecord] = field(default_factory=list)


def report_title(profile: Profile) -> str:
    if profile.device is None:
        return "bringup report"
    return f"bringup report: {profile.device.name} ({profile.device.id})"


def build_report(profile: Profile, source: str, baseline: Profile | None = None,
                 baseline_source: str | None = None) -> Report:
    comparison = compare_to_baseline(baseline, profile, baseline_source or "") if baseline is not None else None
    capabilities = capability_rows(profile)
    tables = bench_tables(profile.bench)
    matrix = op_matrix(profile.ops)
    plan = plan_view(profile)
    if comparison is not None:
        comparison.mark_capabilities(capabilities)
        comparison.mark_bench(tables)
        comparison.mark_ops(matrix)
        comparison.compare_plan(plan, plan_view(baseline))
    return Report(
        title=report_title(profile),
        source=source,
        verdict=verdict_of(profile),
        speed=speed_card(profile.bench),
        device=device_facts(profile),
        environment=environment_facts(profile),
        stages=stage_facts(profile),
        capabilities=capabilities,
        ops=matrix,
        compiled=compiled_rows(profile.compiled),
        roofline=roofline(profile.bench),
        bench=tables,
        plan=plan,
        fallbacks=fallback_rows(profile),
        selftest=selftest_facts(profile.selftest),
        collectives=collectives_view(profile.collectives),
        baseline=comparison,
        soak=soak_facts(profile.soak),
        evals=eval_rows(profile.eval),
        deploy=deploy_views(profile),
        graph_replay=list(profile.graph_replay),
    )
