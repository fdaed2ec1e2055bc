"""The verify-ops stage: plan the tasks, skip what a previous run recorded, merge results into a profile."""

from __future__ import annotations

import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from bringup.probes.ops.catalog import case_ids_by_label, load_catalog, select_cases
from bringup.probes.ops.compiled.blocks import BLOCKS
from bringup.probes.ops.compiled.execute import check_backend
from bringup.probes.ops.replay.targets import TARGETS as REPLAY_TARGETS
from bringup.probes.ops.runner import op_task
from bringup.probes.ops.spec import DEFAULT_FLOAT_DTYPES, STATISTICAL_JUDGES
from bringup.profiles.schema import Profile
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord, VerifyOpsRecord

STAGE = "verify-ops"
Record = TypeVar("Record", OpCaseRecord, CompiledRecord, GraphReplayRecord)


@dataclass
class Plan:
    op_tasks: list[dict[str, Any]]
    compiled_tasks: list[dict[str, Any]]
    skipped: list[tuple[str, ...]] = field(default_factory=list)
    replay_tasks: list[dict[str, Any]] = field(default_factory=list)  # eager against graph replay (with compiled)

    @property
    def tasks(self) -> list[dict[str, Any]]:
        return [*self.op_tasks, *self.compiled_tasks, *self.replay_tasks]


def plan_tasks(ops: list[str] | None, dtypes: list[str] | None, pattern: str | None, *, compiled: bool,
               backend: str, model_only: bool = False, skip: list[str] | None = None) -> Plan:
    """Eager op cases from the filters; with `compiled`, blocks plus (when filtered) the chosen op cases.
    model_only: only the cases at the model's shapes (`--model`; the catalog must have been given the model).
    skip: ops and blocks left out (`--skip`).

    ValueError for unknown names or a bad regex (the CLI turns it into a usage error).
    """
    catalog = load_catalog()
    try:
        regex = re.compile(pattern) if pattern else None
    except re.error as exc:
        raise ValueError(f"-k {pattern!r} is not a valid regular expression: {exc}") from None
    named_blocks = [name for name in (ops or []) if name in REPLAY_TARGETS]
    if named_blocks and not compiled:
        raise ValueError(f"{', '.join(named_blocks)}: compiled or replayed block(s), compared only with --compiled")
    op_names = [name for name in (ops or []) if name not in REPLAY_TARGETS]
    keys = [] if (ops and not op_names) else select_cases(catalog, op_names or None, dtypes, pattern, model_only)
    op_tasks = [op_task(key) for key in keys]
    compiled_tasks: list[dict[str, Any]] = []
    replay_tasks: list[dict[str, Any]] = []
    if compiled:
        check_backend(backend)
        block_names = [name for name in (named_blocks if ops else BLOCKS) if name in BLOCKS]
        float_dtypes = [d for d in (dtypes or DEFAULT_FLOAT_DTYPES) if d in DEFAULT_FLOAT_DTYPES or d == "float64"]
        replay_tasks = replay_plan(named_blocks if ops else list(REPLAY_TARGETS), float_dtypes, regex)
        for name in block_names:
            for dtype in float_dtypes:
                if regex and not regex.search(f"{name}[{dtype}]"):
                    continue
                compiled_tasks.append({"kind": "compiled", "target": name, "case": None, "dtype": dtype,
                                       "backend": backend})
        if op_names or pattern:  # compiling every op case is slow: only a chosen subset
            compiled_tasks += [{"kind": "compiled", "target": k.op, "case": k.case, "case_id": k.case_id,
                                "dtype": k.dtype, "backend": backend} for k in keys
                               if catalog.get(k.op).find(k).judge not in STATISTICAL_JUDGES]
    if skip:
        unknown = [name for name in skip if name not in catalog.ops and name not in REPLAY_TARGETS]
        if unknown:
            raise ValueError(f"--skip {', '.join(unknown)}: not an op or block in the catalog (`bringup verify-ops "
                             "--list` shows them)")
        op_tasks = [t for t in op_tasks if t["op"] not in skip]
        compiled_tasks = [t for t in compiled_tasks if t["target"] not in skip]
        replay_tasks = [t for t in replay_tasks if t["target"] not in skip]
    return Plan(op_tasks, compiled_tasks, replay_tasks=replay_tasks)


def replay_plan(names: list[str], dtypes: list[str], regex: re.Pattern[str] | None) -> list[dict[str, Any]]:
    """Eager-against-replay tasks: each block (the decode step among them) in each dtype but float64, which the
    graph's blocks have no use for and devices often refuse."""
    return [{"kind": "replay", "target": name, "dtype": dtype} for name in names for dtype in dtypes
            if dtype != "float64" and not (regex and not regex.search(f"{name}[{dtype}]"))]


def record_key(record: VerifyOpsRecord) -> tuple[str, ...]:
    """The resume key of a record: what `key_of` gives for the task that produced it."""
    if isinstance(record, OpCaseRecord):
        return ("op", *record.key())
    if isinstance(record, GraphReplayRecord):
        return ("replay", *record.key())
    key = ("compiled", record.target, record.dtype, record.backend)
    return key if record.case is None else (*key, record.case)


def key_of(task: dict[str, Any]) -> tuple[str, ...]:
    """The resume key of a task: (op, dtype, case id) for op cases, (target, dtype, backend[, case id]) for
    compiled (the label stands in for a task made without an id)."""
    if task["kind"] == "op":
        return ("op", task["op"], task["dtype"], task.get("case_id") or task["case"])
    if task["kind"] == "replay":
        return ("replay", task["target"], task["dtype"])
    key = ("compiled", task["target"], task["dtype"], task["backend"])
    return key if task.get("case") is None else (*key, task.get("case_id") or task["case"])


def with_case_ids(records: list[Record]) -> list[Record]:
    """The records, each op case without an id given the id of the catalog case its op has under its label (the
    rule that migrates a profile recorded before cases had ids; a label no case has keeps no id)."""
    ids = case_ids_by_label(load_catalog())
    out = []
    for record in records:
        if isinstance(record, GraphReplayRecord):
            out.append(record)
            continue
        op = record.op if isinstance(record, OpCaseRecord) else record.target
        case_id = ids.get((op, record.case)) if record.case is not None and record.case_id is None else None
        out.append(record.model_copy(update={"case_id": case_id}) if case_id else record)
    return out


def _records(profile: Profile | None) -> list[VerifyOpsRecord]:
    return with_case_ids([*profile.ops, *profile.compiled, *profile.graph_replay]) if profile is not None else []


def recorded_keys(profile: Profile | None) -> set[tuple[str, ...]]:
    return {record_key(r) for r in _records(profile)}


def drop_recorded(plan: Plan, profile: Profile | None) -> Plan:
    """--resume: keep only tasks the profile has no record of."""
    done = recorded_keys(profile)
    keep_ops = [t for t in plan.op_tasks if key_of(t) not in done]
    keep_compiled = [t for t in plan.compiled_tasks if key_of(t) not in done]
    keep_replay = [t for t in plan.replay_tasks if key_of(t) not in done]
    skipped = [key_of(t) for t in plan.tasks if key_of(t) in done]
    return Plan(keep_ops, keep_compiled, skipped, keep_replay)


def merge_results(profile: Profile, results: list[VerifyOpsRecord]) -> None:
    """Replace records with the same key, append new ones (the profile keeps other runs' records)."""
    ops: dict[tuple, OpCaseRecord] = {r.key(): r for r in with_case_ids(profile.ops)}
    compiled: dict[tuple, CompiledRecord] = {r.key(): r for r in with_case_ids(profile.compiled)}
    replayed: dict[tuple, GraphReplayRecord] = {r.key(): r for r in profile.graph_replay}
    for record in results:
        if isinstance(record, OpCaseRecord):
            ops[record.key()] = record
        elif isinstance(record, GraphReplayRecord):
            replayed[record.key()] = record
        else:
            compiled[record.key()] = record
    profile.ops = list(ops.values())
    profile.compiled = list(compiled.values())
    profile.graph_replay = list(replayed.values())


def records_for(plan_keys: list[tuple[str, ...]], profile: Profile | None) -> list[VerifyOpsRecord]:
    """Records of the given keys already in the profile (what --resume did not re-run)."""
    wanted = set(plan_keys)
    return [r for r in _records(profile) if record_key(r) in wanted]


@dataclass
class Summary:
    op_counts: Counter
    compiled_counts: Counter
    failing: list[VerifyOpsRecord]
    verified: bool  # at least one case really passed
    replay_counts: Counter = field(default_factory=Counter)

    @property
    def exit_code(self) -> int:
        return 1 if self.failing or not self.verified else 0

    def line(self) -> str:
        ops = ", ".join(f"{n} {s}" for s, n in sorted(self.op_counts.items())) or "no op cases"
        text = f"op cases: {ops}"
        if self.compiled_counts:
            text += "; compiled: " + ", ".join(f"{n} {s}" for s, n in sorted(self.compiled_counts.items()))
        if self.replay_counts:
            text += "; graph replay: " + ", ".join(f"{n} {s}" for s, n in sorted(self.replay_counts.items()))
        if not self.verified:
            text += " — nothing verified (every case was unsupported or failed)"
        return text


def summarize(results: list[VerifyOpsRecord]) -> Summary:
    op_results = [r for r in results if isinstance(r, OpCaseRecord)]
    compiled_results = [r for r in results if isinstance(r, CompiledRecord)]
    replay_results = [r for r in results if isinstance(r, GraphReplayRecord)]
    failing: list[VerifyOpsRecord] = [r for r in op_results if r.failing]
    failing += [r for r in compiled_results if r.failing]
    failing += [r for r in replay_results if r.failing]
    verified = any(r.status == "pass" for r in results)
    return Summary(Counter(r.status for r in op_results), Counter(r.status for r in compiled_results),
                   failing, verified, Counter(r.status for r in replay_results))


def worker_env(cache_dir: Path | None) -> dict[str, str]:
    """The worker's environment: ours, plus our sys.path (plugins stay importable) and the inductor cache."""
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.insert(0, env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    if cache_dir is not None:
        env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir)
    return env


def without_unsupported_backend(plan: Plan, profile: Profile | None) -> tuple[Plan, list[CompiledRecord]]:
    """The plan less the compiled comparisons whose backend the probe recorded unsupported on this device (inductor
    with no code generator for it, say), and for each an `unsupported` record quoting the probe's reason: compiling
    it would only repeat the probe's failure as compile errors. A backend the probe did not record is still tried."""
    compile_caps = profile.capabilities.compile if profile is not None and profile.capabilities else {}
    kept, refused = [], []
    for task in plan.compiled_tasks:
        cap = compile_caps.get(task["backend"])
        if cap is None or cap.status != "unsupported":
            kept.append(task)
            continue
        why = (cap.reason or cap.evidence or "no reason recorded").splitlines()[0][:300]
        refused.append(CompiledRecord(target=task["target"], case=task.get("case"), case_id=task.get("case_id"),
                                      dtype=task["dtype"], backend=task["backend"], status="unsupported",
                                      message=f"not compiled: the probe recorded capabilities.compile."
                                              f"{task['backend']} unsupported here ({why}); the eager path runs"))
    return replace(plan, compiled_tasks=kept), refused
