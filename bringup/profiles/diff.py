"""What changed between two profiles: versions, environment, device, capabilities, ops, compiled, graph replay,
bench, evals, and the model plans tune recorded."""

from dataclasses import asdict, dataclass
from typing import Any

from bringup.profiles.bench_diff import diff_bench
from bringup.profiles.schema import Profile

VOLATILE_DEVICE_FIELDS = {"memory_free_bytes"}


@dataclass
class Change:
    section: str
    key: str
    before: Any
    after: Any
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def diff_mappings(section: str, a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    changes = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            changes.append(Change(section, key, a.get(key), b.get(key)))
    return changes


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def environment_changes(a: Profile, b: Profile) -> list[Change]:
    ea = a.environment.model_dump(exclude={"captured"}) if a.environment else {}
    eb = b.environment.model_dump(exclude={"captured"}) if b.environment else {}
    return diff_mappings("environment", flatten(ea), flatten(eb))


def device_changes(a: Profile, b: Profile) -> list[Change]:
    da = a.device.model_dump(exclude=VOLATILE_DEVICE_FIELDS) if a.device else {}
    db = b.device.model_dump(exclude=VOLATILE_DEVICE_FIELDS) if b.device else {}
    return diff_mappings("device", flatten(da), flatten(db))


def capability_statuses(p: Profile) -> dict[str, str]:
    if p.capabilities is None:
        return {}
    return {f"{g}.{n}": c.status for g, checks in p.capabilities.groups().items() for n, c in checks.items()}


def capability_changes(a: Profile, b: Profile) -> list[Change]:
    return diff_mappings("capabilities", capability_statuses(a), capability_statuses(b))


def ops_changes(a: Profile, b: Profile) -> list[Change]:
    """Cases paired by identity (op, dtype, case id), each named by its label in b, the newer profile."""
    labels = {r.key(): r.case for r in b.ops}

    def statuses(p: Profile) -> dict[str, str]:
        return {f"{r.op} {r.dtype} [{labels.get(r.key(), r.case)}]": r.status for r in p.ops}

    return diff_mappings("ops", statuses(a), statuses(b))


def compiled_changes(a: Profile, b: Profile) -> list[Change]:
    def statuses(p: Profile) -> dict[str, str]:
        return {f"{r.target} {r.dtype} {r.backend}": r.status for r in p.compiled}

    return diff_mappings("compiled", statuses(a), statuses(b))


def graph_replay_changes(a: Profile, b: Profile) -> list[Change]:
    def statuses(p: Profile) -> dict[str, str]:
        return {f"{r.target} {r.dtype}": r.status for r in p.graph_replay}

    return diff_mappings("graph_replay", statuses(a), statuses(b))


def bench_changes(a: Profile, b: Profile) -> list[Change]:
    """Only measurements that moved beyond both runs' noise, or exist in one profile alone."""
    changes = []
    for row in diff_bench(a.bench, b.bench):
        verdict = row["verdict"]
        if verdict in ("same", "not comparable"):
            continue
        note = verdict
        if "ratio" in row:
            note = f"{verdict}: time x{row['ratio']:.3f} (noise ±{row['noise_pct']:.1f}%)"
        key = f"{row['group']} {row['key']}"
        if "rate_unit" in row:  # sized differently in the two runs: compare the rates, not the times
            changes.append(Change("bench", f"{key} ({row['rate_unit']})", row["a_rate"], row["b_rate"], note))
        else:
            changes.append(Change("bench", key, row["a_median_s"], row["b_median_s"], note))
    return changes


def eval_figures(p: Profile) -> dict[str, str]:
    """Per model evaluated: its perplexity, and its KL divergence and top-1 agreement when it had a reference."""
    figures = {}
    for key, record in (p.eval or {}).items():
        ref = record.reference
        figures[key] = f"ppl {record.ppl:.5g}" + ("" if ref is None else
                                                 f", KLD {ref.kld_mean:.3g}, top-1 {ref.top1_agreement:.2%}")
    return figures


def eval_changes(a: Profile, b: Profile) -> list[Change]:
    return diff_mappings("eval", eval_figures(a), eval_figures(b))


def model_plan_choices(p: Profile) -> dict[str, Any]:
    """Per model tuned and per setting of its recorded plan: the choice as the plan table shows it (`name [hash]
    setting`), the same text whether the record holds its values as data or, written by an older tune, as text."""
    return {f"{key} {setting}": record.shown(setting) for key, record in (p.models or {}).items()
            for setting in record.plan}


def models_changes(a: Profile, b: Profile) -> list[Change]:
    return diff_mappings("models", model_plan_choices(a), model_plan_choices(b))


def diff_profiles(a: Profile, b: Profile) -> list[Change]:
    return (
        device_changes(a, b)
        + environment_changes(a, b)
        + capability_changes(a, b)
        + ops_changes(a, b)
        + compiled_changes(a, b)
        + graph_replay_changes(a, b)
        + bench_changes(a, b)
        + eval_changes(a, b)
        + models_changes(a, b)
    )
