"""The few words `bringup all` prints per stage, and the plan in one wrapped line."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bringup.profiles.schema import Profile


def counts_text(counts: dict[str, int], order: tuple[str, ...]) -> str:
    """`940 pass · 15 unsupported`: the statuses in `order` first, zero counts left out."""
    keys = [k for k in order if counts.get(k)] + sorted(k for k in counts if k not in order and counts[k])
    return " · ".join(f"{counts[k]} {k}" for k in keys) or "none"


def tally(statuses: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for status in statuses:
        counts[status] = counts.get(status, 0) + 1
    return counts


def devices_figure(profile: Profile, selection_reason: str | None) -> str:
    if profile.device is None:
        return "no device recorded"
    text = f"{profile.device.id} ({profile.device.name})"
    return f"{text}: {selection_reason}" if selection_reason else text


def probe_figure(profile: Profile) -> str:
    """`15 pass · 10 skip (not applicable)`: the capabilities as the verdict counts them."""
    from bringup.profiles.verdict.capability_checks import capability_checks

    if profile.capabilities is None:
        return "no capabilities recorded"
    results = [c.result for c in capability_checks(profile.capabilities, profile.ops)]
    return counts_text(tally(results), ("pass", "warn", "skip")).replace(" skip", " skip (not applicable)")


def verify_ops_figure(profile: Profile) -> str:
    """`ops 940 pass · 15 skip; compiled 15 pass; through the host on the hot path: rms_norm, topk`: the op cases
    and comparisons as the verdict grades them, and the hot-path ops it warns about for running through the host."""
    from bringup.profiles.verdict.host_fallback import host_fallback_checks
    from bringup.profiles.verdict.run_checks import compiled_checks, op_checks

    order = ("pass", "fail", "warn", "skip")
    text = "ops " + counts_text(tally([c.result for c in op_checks(profile)]), order)
    if profile.compiled:
        text += "; compiled " + counts_text(tally([c.result for c in compiled_checks(profile)]), order)
    if profile.graph_replay:
        from bringup.profiles.verdict.graph_replay import replay_checks

        text += "; graph replay " + counts_text(tally([c.result for c in replay_checks(profile.graph_replay)]), order)
    through_host = [c.name for c in host_fallback_checks(profile.ops) if c.result == "warn"]
    if through_host:
        text += "; through the host on the hot path: " + ", ".join(through_host)
    return text


def speed_figure(profile: Profile) -> str | None:
    """`decode 2.1k tok/s · TTFT p50 12 ms · inter-token p99 1.3 ms`: the LLM speed card, when measured."""
    records = {r.key: r for r in profile.bench.records("serve")} if profile.bench else {}
    decode, ttft, gaps = records.get("decode_b1"), records.get("ttft"), records.get("inter_token")
    if decode is None or decode.status != "ok" or ttft is None or gaps is None or "p50_s" not in ttft.params:
        return None
    return (f"decode {decode.params['tokens_per_s']:.4g} tok/s · TTFT p50 {ttft.params['p50_s'] * 1e3:.3g} ms · "
            f"inter-token p99 {gaps.params['p99_s'] * 1e3:.3g} ms")


def bench_figure(profile: Profile) -> str:
    ceilings = profile.bench.ceilings if profile.bench else None
    speed = speed_figure(profile)
    if ceilings is None:
        return speed or "no ceilings measured"
    parts = [speed] if speed else []
    if ceilings.tflops:
        parts.append("matmul " + ", ".join(f"{d} {v:.3g}" for d, v in ceilings.tflops.items()) + " TFLOP/s")
    if ceilings.gbps:
        parts.append(f"bandwidth {ceilings.gbps:.3g} GB/s")
    return "; ".join(parts) or "no ceilings measured"


def selftest_figure(profile: Profile) -> str:
    s = profile.selftest
    if s is None:
        return "no result recorded"
    return f"{s.status} · max abs err {s.max_abs_err:.2g} · top-1 agreement {s.top1_agreement:.0%}"


def stage_figure(name: str, profile: Profile | None, selection_reason: str | None = None) -> str:
    """The key figure of stage `name`, read from the profile it wrote."""
    if profile is None:
        return "no profile"
    if name == "devices":
        return devices_figure(profile, selection_reason)
    figures = {"probe": probe_figure, "verify-ops": verify_ops_figure, "bench": bench_figure,
               "selftest": selftest_figure, "soak": soak_figure}
    return figures[name](profile) if name in figures else ""


def soak_figure(profile: Profile) -> str:
    """`float32 120 rounds, rate 98 % of the start · bfloat16 ... · 1 finding`."""
    soak = profile.soak
    if soak is None:
        return "not recorded"
    parts = [f"{d.dtype} {d.rounds} rounds, rate {d.ratio:.0%} of the start"
             + (f", {len(d.wrong_rounds)} wrong" if d.wrong_rounds else "") for d in soak.dtypes]
    return " · ".join(parts + ([f"{len(soak.findings)} finding(s)"] if soak.findings else []))


def plan_line(rows: list[tuple[str, str, str]]) -> str:
    """`dtype bfloat16 · attention <first> > <next> · compiled eager · kv 256 × 16 tokens · ...`: the plan's rows
    as they are shown, less the quiet ones."""
    from bringup.runner.plan.settings import QUIET_VALUES, SHORT_SETTING

    def shown(setting: str, value: str) -> str:
        short = SHORT_SETTING.get(setting, setting)
        return value if value.startswith(short) or value == "eager" else f"{short} {value}"  # "compiled (inductor)"

    # a dense model, the plain path, every op on the device, no global fallback: nothing to say
    return " · ".join(shown(setting, value) for setting, value, _ in rows if (setting, value) not in QUIET_VALUES)
