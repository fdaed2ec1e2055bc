"""The verify-collectives stage: validate the request, choose backend and world, run, build the section."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from bringup.backends.host import is_host
from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.probes.collectives.backend_choice import BackendChoice, choose_backend
from bringup.probes.collectives.faults import FaultSpec, fault_from_env
from bringup.probes.collectives.ops import OP_NAMES
from bringup.probes.collectives.patterns import DEFAULT_DTYPES, SUPPORTED_DTYPES
from bringup.probes.collectives.plan import Plan
from bringup.probes.collectives.ranks.launcher import LaunchOutcome, launch
from bringup.probes.collectives.ranks.processes import START_METHODS
from bringup.probes.collectives.ranks.torchrun_mode import in_external_world, reports_here, run_in_world, world_info
from bringup.probes.collectives.report import build_section
from bringup.probes.collectives.sizes import DEFAULT_SIZES, parse_sizes
from bringup.profiles.sections.collectives import CollectivesSection

log = get_logger("collectives")
__all__ = ["CollectivesOptions", "planned_cases", "reports_here", "run_collectives"]
HOST_PROCESSES_DEFAULT = 2   # CPU-side ranks when --nproc is not given


@dataclass
class CollectivesOptions:
    nproc: int | None = None
    backend: str = "auto"
    sizes: str = DEFAULT_SIZES
    dtypes: list[str] = field(default_factory=lambda: list(DEFAULT_DTYPES))
    ops: list[str] = field(default_factory=lambda: list(OP_NAMES))
    warmup: int = 2
    iters: int = 10
    timeout_s: float = 60.0
    startup_timeout_s: float = 120.0
    start_method: str = "auto"
    inject_fault: str | None = None


@dataclass
class CollectivesRun:
    section: CollectivesSection
    outcome: LaunchOutcome
    choice: BackendChoice
    reporting: bool          # this process prints and writes the profile (the launcher, or rank 0)


def _split(values: list[str]) -> list[str]:
    return [v.strip() for item in values for v in item.split(",") if v.strip()]


def _validated(options: CollectivesOptions) -> tuple[list[int], list[str], list[str], FaultSpec | None]:
    try:
        sizes = parse_sizes(options.sizes)
    except ValueError as exc:
        raise BringupError(f"--sizes: {exc}") from None
    dtypes = _split(options.dtypes) or list(DEFAULT_DTYPES)
    unknown = [d for d in dtypes if d not in SUPPORTED_DTYPES]
    if unknown:
        raise BringupError(f"--dtype {', '.join(unknown)}: not a collective dtype; choose from "
                           f"{', '.join(SUPPORTED_DTYPES)}")
    ops = _split(options.ops) or list(OP_NAMES)
    unknown = [o for o in ops if o not in OP_NAMES]
    if unknown:
        raise BringupError(f"--op {', '.join(unknown)}: unknown operation; choose from {', '.join(OP_NAMES)}")
    if options.timeout_s <= 0 or options.startup_timeout_s <= 0:
        raise BringupError("--timeout and --startup-timeout must be positive seconds")
    if options.iters < 1 or options.warmup < 0:
        raise BringupError("--iters must be at least 1 and --warmup at least 0")
    if options.start_method not in ("auto", *START_METHODS):
        raise BringupError(f"--start-method {options.start_method}: choose auto, fork or spawn")
    try:
        fault = FaultSpec.parse(options.inject_fault) if options.inject_fault else fault_from_env()
    except ValueError as exc:
        raise BringupError(f"--inject-fault: {exc}") from None
    return sizes, list(dict.fromkeys(dtypes)), list(dict.fromkeys(ops)), fault


def _world_size(options: CollectivesOptions, family: str, host_only: bool, device_count: int) -> int:
    if options.nproc is not None and options.nproc < 1:
        raise BringupError("--nproc must be at least 1")
    if host_only:
        return options.nproc or HOST_PROCESSES_DEFAULT
    if device_count < 1:
        raise BringupError(f"no {family} device is usable; check `bringup devices`")
    nproc = options.nproc or device_count
    if nproc > device_count:
        raise BringupError(f"--nproc {nproc} needs {nproc} {family} devices, but {device_count} are usable; "
                           f"use --nproc {device_count} or fewer (one process per device)")
    return nproc


def run_collectives(options: CollectivesOptions, family: str, device_type: str, device_count: int,
                    fallbacks: FallbackRecorder, on_case_done: Callable[[int], None] | None = None
                    ) -> CollectivesRun:
    """Run the checks -- N local processes, or this process's share of an external (torchrun) world."""
    sizes, dtypes, ops, fault = _validated(options)
    choice = choose_backend(options.backend, family, device_type, fallbacks)
    log.info("collectives backend: %s (%s); buffers on %s", choice.name, choice.reason, choice.device_type)
    external = in_external_world()
    if external and options.nproc is not None:
        raise BringupError("--nproc starts local processes, but this process is already one rank of a "
                           "torchrun/env:// world; drop --nproc under torchrun")
    plan = Plan(backend=choice.name, device_type=choice.device_type, ops=ops, dtypes=dtypes, sizes=sizes,
                warmup=options.warmup, iters=options.iters, timeout_s=options.timeout_s)
    if external:
        info = world_info()
        log.info("running as rank %d of %d (%d node(s)) from the env:// rendezvous", info.rank,
                 info.world_size, info.nnodes)
        outcome = run_in_world(plan, fault, on_case_done)
        section = build_section(plan, outcome, choice, "torchrun", info.nnodes, fallbacks.events)
        return CollectivesRun(section, outcome, choice, reporting=info.rank == 0)
    world = _world_size(options, family, is_host(choice.device_type), device_count)
    method = options.start_method
    if method == "auto":
        method = "fork" if sys.platform.startswith("linux") else "spawn"
    log.info("starting %d local rank(s) (%s start) on %s, rendezvous on 127.0.0.1", world, method,
             choice.device_type)
    outcome = launch(plan, world, start_method=method, startup_timeout_s=options.startup_timeout_s,
                     fault_spec=None if fault is None else _spec_text(fault), on_case_done=on_case_done)
    section = build_section(plan, outcome, choice, method, fallbacks=fallbacks.events)
    for fault in section.faults:
        tail = outcome.log_tails.get(fault.rank if fault.rank is not None else -2, "")
        if fault.culprit and tail:
            log.warning("rank %s output, last lines:\n%s", fault.rank, tail)
    if section.faults and outcome.log_tails.get(-1):
        log.warning("rank start-up helper output, last lines:\n%s", outcome.log_tails[-1])
    return CollectivesRun(section, outcome, choice, reporting=True)


def _spec_text(fault: FaultSpec) -> str:
    parts = [f"rank={fault.rank}", fault.kind, f"elements={fault.elements}", f"code={fault.code}"]
    if fault.op:
        parts.append(f"op={fault.op}")
    return ":".join(parts)


def planned_cases(options: CollectivesOptions) -> int:
    sizes, dtypes, ops, _ = _validated(options)
    plan = Plan(backend="-", device_type="-", ops=ops, dtypes=dtypes, sizes=sizes)
    return len(plan.cases())
