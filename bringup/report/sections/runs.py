"""Selftest, fallbacks and collectives: what ran end to end, and what had to fall back."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bringup.profiles.schema import Profile
from bringup.profiles.sections.collectives import (
    BANDWIDTH_LABELS,
    CollectiveCaseRecord,
    CollectiveFault,
    CollectivesSection,
)
from bringup.profiles.sections.selftest import SelftestSection
from bringup.profiles.sections.soak import SoakSection
from bringup.report.sections.identity import Fact, shown
from bringup.report.text import number, seconds


@dataclass
class FallbackRow:
    where: str  # which run counted them
    level: str  # op | path | global
    count: int


def selftest_facts(selftest: SelftestSection | None) -> list[Fact]:
    if selftest is None:
        return []
    s = selftest
    facts = [Fact("status", s.status), Fact("model", s.model), Fact("device", s.device), Fact("dtype", s.dtype),
             Fact("attention", s.attention), Fact("compiled", s.compiled or "eager"),
             Fact("weight layout", s.weight_layout),
             Fact("steps", f"{s.steps} teacher-forced greedy steps after {s.prompt_tokens} prompt tokens"),
             Fact("max abs error", f"{number(s.max_abs_err)} (threshold {number(s.threshold)}, reference RMS "
                  f"{number(s.reference_rms)})"),
             Fact("top-1 agreement", f"{s.top1_agreement:.1%} ({s.near_tie_disagreements} near-tie disagreements)"),
             Fact("time", seconds(s.seconds))]
    if s.reason:
        facts.append(Fact("reason", s.reason))
    return facts


def soak_facts(soak: SoakSection | None) -> list[Fact]:
    if soak is None:
        return []
    facts = [Fact("status", soak.status), Fact("length", f"{seconds(soak.seconds)}, matmul n={soak.matmul_size}"),
             Fact("each round", "; ".join(soak.checks))]
    for d in soak.dtypes:
        wrong = f"wrong in rounds {', '.join(map(str, d.wrong_rounds[:8]))}" if d.wrong_rounds else "right every round"
        facts.append(Fact(d.dtype, f"{d.rounds} rounds; matmul {number(d.first_tflops)} → {number(d.last_tflops)} "
                                   f"TFLOP/s ({d.ratio:.0%} of the start; min {number(d.min_tflops)}, max "
                                   f"{number(d.max_tflops)}); {wrong}; {d.bitwise_changes} bitwise changes"))
    facts += [Fact("finding", finding) for finding in soak.findings]
    return facts


def fallback_rows(profile: Profile) -> list[FallbackRow]:
    rows = []
    if profile.selftest is not None:
        rows += [FallbackRow("selftest", level, count) for level, count in profile.selftest.fallbacks.items()]
    if profile.collectives is not None:
        levels = Counter(f.level for f in profile.collectives.fallbacks)
        rows += [FallbackRow("verify-collectives", level, count) for level, count in levels.items()]
    for record in profile.bench.records("e2e") if profile.bench else []:
        counts = record.params.get("fallbacks")
        if isinstance(counts, dict):
            rows += [FallbackRow(f"bench e2e {record.key}", str(level), int(count))
                     for level, count in counts.items() if isinstance(count, int | float)]
    return rows


@dataclass
class CollectivesView:
    facts: list[Fact]
    cases: list[CollectiveCaseRecord]
    faults: list[CollectiveFault]
    bandwidth_unit: str = "GB/s"      # the bandwidth columns' unit, with the path when it is not the device's


def collectives_view(section: CollectivesSection | None) -> CollectivesView | None:
    if section is None:
        return None
    c = section
    facts = [Fact("status", c.status), Fact("world size", f"{c.world_size} on {c.nnodes} node(s), {c.launch}"),
             Fact("backend", f"{c.backend} ({c.backend_reason})"), Fact("buffers on", c.device_type),
             Fact("dtypes", ", ".join(c.dtypes) or "—"), Fact("cases", f"{len(c.cases)} of {c.cases_planned} planned"),
             Fact("timeout", seconds(c.timeout_s)), Fact("time", seconds(c.seconds))]
    if c.rank_devices:
        facts.append(Fact("ranks' devices", ", ".join(c.rank_devices)))
    if c.data_path:
        facts.append(Fact("bandwidth", BANDWIDTH_LABELS[c.data_path]))
    if c.detected_after_s is not None:
        facts.append(Fact("fault detected after", seconds(c.detected_after_s)))
    facts += [Fact("fallback", f"{f.what}: wanted {f.wanted}, used {f.instead}, because {f.why}")
              for f in c.fallbacks]
    facts = [f for f in facts if f.value != shown(None)]
    unit = "GB/s, host-staged" if c.data_path == "host_staged" else "GB/s"
    return CollectivesView(facts, list(c.cases), list(c.faults), unit)
