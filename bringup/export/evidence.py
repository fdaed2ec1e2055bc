"""What a profile proves, question by question, for the engine mappings: each answer a Fact holding a value only when
the evidence holds it, the reason, the profile entries it rests on, and what to run when it is missing.

Conservative as the runner's plan is: a missing section means "not verified", never "fine"; a check the device's
backend declares not applicable (capabilities.not_applicable) is read as such; nothing is read from a device's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from bringup.errors import BringupError
from bringup.export.tuned import TunedPlan
from bringup.number_rule import NumberRefused, whole_number
from bringup.profiles.attention_kinds import FUSED_SDPA
from bringup.profiles.schema import Capability, Profile
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.runner.plan.plan import RUNNER_OPS, choose_dtype
from bringup.runner.plan.profile_facts import ProfileFacts

EVIDENCE_CHARS = 200
# the share of free memory planned into, as the runner's KV sizing does (MEMORY_FRACTION in runner/plan/kv_sizing.py)
MEMORY_MARGIN = 0.9
FP8_STORAGE = ("float8_e4m3fn", "float8_e5m2")
# what proves a quantized matmul here: the probe's capability, then the kernels' own verify-ops cases
QUANTIZED_KERNELS: dict[str, tuple[str, tuple[str, ...]]] = {
    "int8": ("int8_weight_only_matmul", ("_weight_int8pack_mm", "_int_mm")),
    "int4": ("int4_weight_only_matmul", ("_weight_int4pack_mm_for_cpu", "_weight_int4pack_mm")),
    "fp8": ("fp8_scaled_mm", ("_scaled_mm",)),
}
CORES = re.compile(r"([0-9]+)\s+logical,\s*([0-9]+)\s+physical,\s*([0-9]+)\s+usable", re.ASCII)
MAX_CORES = 1 << 16  # more than any host's CPUs (Linux builds for at most 8,192)
MAX_RANKS = 1 << 16  # more ranks than any torch.distributed job has run
PROBE, VERIFY_OPS = "run `bringup probe`", "run `bringup verify-ops`"


@dataclass(frozen=True)
class Fact:
    value: Any  # None (or False) when the evidence is missing or negative
    reason: str
    evidence: tuple[str, ...] = ()
    to_get: str | None = None


@dataclass(frozen=True)
class Cores:
    logical: int
    physical: int
    usable: int


def bounded(value: Any, field: str, high: int) -> int:
    """A count from the profile by the number rule, at least 1 and at most `high`; BringupError naming the field and
    the bound otherwise."""
    try:
        return whole_number(value, field, high, low=1)
    except NumberRefused as exc:
        raise BringupError(f"{exc}; the profile was edited or comes from elsewhere: record it again") from None


def short(text: str | None, limit: int = EVIDENCE_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def capability(profile: Profile, group: str, name: str) -> Capability | None:
    caps = profile.capabilities
    return caps.groups().get(group, {}).get(name) if caps else None


def capability_line(group: str, name: str, cap: Capability | None) -> str:
    if cap is None:
        return f"capabilities.{group}.{name}: not in the profile"
    said = cap.evidence or cap.reason
    return f"capabilities.{group}.{name}: {cap.status}" + (f" ({short(said)})" if said else "")


def not_applicable(profile: Profile, check: str) -> str | None:
    """Why the device's backend declares `check` (e.g. features.graphs) not applicable, or None."""
    return profile.capabilities.not_applicable.get(check) if profile.capabilities else None


def is_host(profile: Profile) -> bool | None:
    """Whether the profiled device is the host CPU (None: the profile has no device section)."""
    return None if profile.device is None else not profile.device.is_accelerator


def dtype_verified(profile: Profile, dtype: str) -> tuple[bool, tuple[str, ...]]:
    """A dtype runs here: its probe check is supported and the decoder's op cases at it all pass (the runner's bar)."""
    cap = capability(profile, "dtypes", dtype)
    ops = ProfileFacts(profile).ops(dtype, RUNNER_OPS)
    lines = (capability_line("dtypes", dtype, cap), f"ops at {dtype}: {ops.describe()} (the decoder's ops)")
    return cap is not None and cap.status == "supported" and ops.verified, lines


def served_dtype(profile: Profile, plan: TunedPlan | None) -> Fact:
    """The tuned plan's dtype when it is verified here; else the bundled runner's choice from the profile (the
    fastest verified low-precision dtype, float32 otherwise) when that one is verified."""
    before = ""
    if plan is not None:
        ok, lines = dtype_verified(profile, plan.dtype)
        if ok:
            return Fact(plan.dtype, f"the dtype of {plan.about()}, verified here",
                        (plan.line("dtype"), *lines))
        before = f"the tuned plan's {plan.dtype} is not verified in this profile ({'; '.join(lines)}); "
    choice = choose_dtype(ProfileFacts(profile))
    ok, lines = dtype_verified(profile, choice.value)
    if ok:
        return Fact(choice.value, f"{before}the bundled runner's rule on this profile: {short(choice.evidence, 300)}",
                    lines)
    return Fact(None, f"{before}no dtype is verified here (not even {choice.value}: {'; '.join(lines)})", lines,
                "run `bringup probe` and `bringup verify-ops`")


def _compiled_problem(record: Any) -> str:
    what = f"{record.target}{f' {record.case}' if record.case else ''} {record.dtype}"
    if record.status == "mismatch":
        if record.compiled_err is not None and record.allowed is not None:
            return f"{what} drifted (compiled error {record.compiled_err:.2e} > allowed {record.allowed:.2e})"
        return f"{what} drifted from eager"
    if record.status == "unsupported":
        return f"{what} unsupported"
    rung = f", first failing rung {record.failing_backend}" if record.failing_backend else ""
    return f"{what} failed ({record.status}{rung})"


def compiled_verdict(profile: Profile, dtype: str | None) -> Fact:
    """torch.compile (inductor, what vLLM compiles with) at `dtype`: True when the probe's sample compiled and every
    eager-vs-compiled comparison passed; False when one failed, drifted or is unsupported; None when not checked."""
    cap = capability(profile, "compile", "inductor")
    line = capability_line("compile", "inductor", cap)
    if cap is None or cap.status == "unknown":
        return Fact(None, "torch.compile (inductor) was not probed", (line,), PROBE)
    if cap.status != "supported":
        return Fact(False, "torch.compile (inductor) is unsupported here", (line,))
    at = f" at {dtype}" if dtype else ""
    records = [r for r in profile.compiled if r.backend == "inductor" and (dtype is None or r.dtype == dtype)]
    if not records:
        return Fact(None, f"no eager-vs-compiled comparison{at} is recorded", (line,),
                    "run `bringup verify-ops --compiled`")
    bad = [r for r in records if r.status != "pass"]
    if bad:
        problems = [_compiled_problem(r) for r in bad]
        return Fact(False, f"{len(bad)} of {len(records)} eager-vs-compiled comparisons{at} did not pass: "
                           + "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else ""),
                    (line, *(f"compiled: {p}" for p in problems[:5])))
    return Fact(True, f"every eager-vs-compiled comparison{at} passed ({len(records)}, inductor)",
                (line, f"compiled: {len(records)} comparison(s){at} (inductor), every one pass"))


def graph_capture(profile: Profile) -> Fact:
    """Value: supported | unsupported | unknown | not_applicable (the backend declares the device has no graphs)."""
    why = not_applicable(profile, "features.graphs")
    if why:
        return Fact("not_applicable", f"graph capture does not apply here: {why}",
                    (f"capabilities.not_applicable.features.graphs: {short(why)}",))
    cap = capability(profile, "features", "graphs")
    status = cap.status if cap is not None else "unknown"
    return Fact(status, f"graph capture is {status if cap is not None else 'not probed'}",
                (capability_line("features", "graphs", cap),), PROBE if status == "unknown" else None)


def _bytes(cap: Capability | None) -> int | None:
    value = cap.details.get("bytes") if cap is not None and cap.status == "supported" else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def device_memory(profile: Profile) -> Fact:
    """Value: (free bytes, total bytes) as the probe measured them."""
    free_cap, total_cap = capability(profile, "memory", "free"), capability(profile, "memory", "total")
    lines = (capability_line("memory", "free", free_cap), capability_line("memory", "total", total_cap))
    free, total = _bytes(free_cap), _bytes(total_cap)
    if free is None or total is None:
        return Fact(None, "free and total device memory were not measured", lines, PROBE)
    return Fact((min(free, total), total), f"{free / 1e9:.1f} of {total / 1e9:.1f} GB free at probe time", lines)


def collective_devices(profile: Profile) -> Fact:
    """Value: how many devices tensor parallelism may span: those whose collectives passed through the device's own
    collective library (1 without that evidence)."""
    found = profile.collectives
    if found is None:
        return Fact(1, "no collectives evidence: one device", ("collectives: not in the profile",),
                    "run `bringup verify-collectives`")
    devices = sorted(set(found.rank_devices)) or [f"{found.world_size} rank(s)"]
    line = (f"collectives: {found.status} on {found.world_size} rank(s) ({', '.join(devices)}), backend "
            f"{found.backend}, data path {found.data_path or 'not recorded'}")
    if found.status != "pass":
        faults = "; ".join(short(f.detail, 80) for f in found.faults[:2])
        return Fact(1, f"verify-collectives failed{f' ({faults})' if faults else ''}: one device", (line,))
    backend = profile.device.backend if profile.device else None
    if found.data_path != "device" or found.device_type != backend:
        path = found.data_path or "unrecorded"
        return Fact(1, f"the collectives passed on {found.device_type} buffers over the {path} path, not through the "
                       "device's own collective library: one device", (line,),
                    "run `bringup verify-collectives` on the devices")
    count = len(set(found.rank_devices)) if found.rank_devices else found.world_size
    count = bounded(count, "collectives.world_size", MAX_RANKS)
    return Fact(max(count, 1), f"collectives passed on {count} {found.device_type} device(s) through "
                               f"{found.backend}", (line,))


def _cases(profile: Profile, ops: tuple[str, ...]) -> list[OpCaseRecord]:
    return [r for r in profile.ops if r.op in ops]


def quantized_kernel(profile: Profile, scheme: str) -> Fact:
    """A quantized matmul (int8, int4, fp8) verified here: True, False (it failed, or the probe refused it), None
    (not checked). A case that computed wrong numbers refuses it whatever else passed."""
    feature, ops = QUANTIZED_KERNELS[scheme]
    cap = capability(profile, "features", feature)
    cases = _cases(profile, ops)
    wrong = [r for r in cases if r.failing]
    passed = [r for r in cases if r.status == "pass"]
    line = capability_line("features", feature, cap)
    if wrong:
        r = wrong[0]
        return Fact(False, f"{r.op}[{r.dtype}] {r.case}: {r.status}",
                    (line, f"ops: {r.op} {r.dtype} {r.case}: {r.status}"))
    if cap is not None and cap.status == "supported":
        return Fact(True, f"{feature} supported", (line,))
    if passed:
        kernels = sorted({f"{r.op}[{r.dtype}]" for r in passed})
        return Fact(True, f"{', '.join(kernels)} passed {len(passed)} op case(s)",
                    (line, f"ops: {', '.join(kernels)}: {len(passed)} case(s) pass, none failing"))
    if cap is not None and cap.status == "unsupported":
        return Fact(False, f"{feature} unsupported", (line,))
    return Fact(None, f"no {scheme} matmul was checked", (line,), f"run `bringup probe --only features.{feature}`")


def _fp8_casts(profile: Profile, dtype: str) -> tuple[list[OpCaseRecord], list[OpCaseRecord]]:
    """(casts from `dtype`, casts to it) among the cast op's cases."""
    casts = [r for r in profile.ops if r.op == "cast"]
    return [r for r in casts if r.dtype == dtype], [r for r in casts if f"to={dtype}" in r.case.split()]


def fp8_kv_storage(profile: Profile) -> Fact:
    """Value: the float8 type a KV cache may be stored in: casts to and from it exact on the device, an fp8 matmul
    verified, and the type not declared inapplicable by the device's backend; e4m3 first (more precision)."""
    compute = quantized_kernel(profile, "fp8")
    why_not, lines = [], []
    for dtype in FP8_STORAGE:
        declared = not_applicable(profile, f"dtypes.{dtype}")
        if declared:
            why_not.append(f"{dtype} does not apply here ({declared})")
            lines.append(f"capabilities.not_applicable.dtypes.{dtype}: {short(declared)}")
            continue
        out_of, into = _fp8_casts(profile, dtype)
        bad = [r for r in out_of + into if r.failing]
        if bad:
            why_not.append(f"a cast with {dtype} failed ({bad[0].dtype} {bad[0].case}: {bad[0].status})")
            lines.append(f"ops: cast {bad[0].dtype} {bad[0].case}: {bad[0].status}")
            continue
        passed = [r for r in out_of + into if r.status == "pass"]
        if not any(r.status == "pass" for r in out_of) or not any(r.status == "pass" for r in into):
            why_not.append(f"casts to and from {dtype} were not both checked")
            continue
        lines.append(f"ops: cast to and from {dtype}: {len(passed)} case(s) pass, none failing")
        if compute.value is True:
            return Fact(dtype, f"{dtype} storage verified (casts to and from it exact on the device) and an fp8 "
                               f"matmul verified ({compute.reason})", (*lines, *compute.evidence))
        why_not.append(f"{dtype} casts pass, but no fp8 matmul is verified ({compute.reason})")
    to_get = compute.to_get if compute.value is None else None
    return Fact(None, "; ".join(why_not) or "no float8 checks recorded", (*lines, *compute.evidence),
                to_get or (VERIFY_OPS if not lines else None))


def fused_attention(profile: Profile, dtype: str) -> Fact:
    """Value: the fused attention kernels (flash, memory-efficient, cuDNN SDPA) verified at `dtype`, or None."""
    facts = ProfileFacts(profile)
    caps = profile.capabilities.attention if profile.capabilities else {}
    if not caps:
        return Fact(None, "the attention checks were not run", ("capabilities.attention: not in the profile",), PROBE)
    verified, notes, lines = [], [], []
    for name in FUSED_SDPA:
        if name not in caps:
            continue
        status, said = facts.capability("attention", name, dtype)
        ops = facts.ops(dtype, {name})
        lines.append(f"capabilities.attention.{name}: {status} at {dtype} ({short(said, 120)})")
        if status == "supported" and not ops.failed:
            verified.append(name)
        else:
            notes.append(f"{name} {status if status != 'supported' else ops.describe()}")
    if verified:
        return Fact(verified, f"fused attention verified at {dtype}: {', '.join(verified)}", tuple(lines))
    return Fact(None, f"no fused attention kernel passed at {dtype}: {'; '.join(notes) or 'none checked'}",
                tuple(lines) or ("capabilities.attention: no fused kernel checked",))


def host_cores(profile: Profile) -> Fact:
    """Value: the host's Cores — from the device facts when the device is the host, else from `bringup env`'s CPU
    facts (environment.cpu.cores)."""
    device = profile.device
    if device is not None and not device.is_accelerator:
        extra = device.extra
        names = ("logical_cores", "physical_cores", "usable_cores")
        if all(k in extra for k in names):
            cores = Cores(*(bounded(extra[k], f"device.extra.{k}", MAX_CORES) for k in names))
            return Fact(cores, f"{cores.usable} usable core(s) ({cores.logical} logical, {cores.physical} physical)",
                        (f"device.extra: logical_cores {cores.logical}, physical_cores {cores.physical}, usable_cores "
                         f"{cores.usable}",))
    said = profile.environment.cpu.get("cores") if profile.environment else None
    found = CORES.search(said or "")
    if found:
        cores = Cores(*(bounded(g, "environment.cpu.cores", MAX_CORES) for g in found.groups()))
        return Fact(cores, f"{cores.usable} usable core(s) ({cores.logical} logical, {cores.physical} physical)",
                    (f"environment.cpu.cores: {said}",))
    return Fact(None, "the profile does not count the host's cores", ("environment.cpu.cores: not in the profile",),
                "run `bringup env --profile PROFILE`")
