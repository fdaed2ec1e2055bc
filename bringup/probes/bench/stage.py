"""The bench stage: choose groups, run them one by one, merge into the profile's bench section."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from bringup.backends.base import DeviceInfo
from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.probes.bench.cache import CacheFlusher, llc_size
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.groups import (
    attention,
    bandwidth,
    compiled,
    dispatch,
    e2e,
    matmul,
    ops,
    serve,
    transfer,
)
from bringup.probes.bench.harness import Harness, HarnessSettings
from bringup.probes.bench.presets import PRESETS, Preset
from bringup.probes.bench.records import short_error
from bringup.probes.bench.roofline import apply_roofline
from bringup.profiles.schema import Profile
from bringup.profiles.sections.bench import BenchGroup, BenchSection, HarnessSettingsModel
from bringup.profiles.store import now_iso

log = get_logger("bench")

GROUPS: dict[str, Callable[[BenchContext], BenchGroup]] = {
    "matmul": matmul.run,
    "bandwidth": bandwidth.run,
    "transfer": transfer.run,
    "dispatch": dispatch.run,
    "attention": attention.run,
    "ops": ops.run,
    "compiled": compiled.run,
    "e2e": e2e.run,
    "serve": serve.run,
}
# Finished groups are written to the profile (stage status partial) at least this often, and always at
# the end: an interrupted run keeps what it measured, without paying a profile rewrite per small group.
CHECKPOINT_EVERY_S = 10.0
QUICK_EXCLUDES = {"compiled": "the quick preset skips compiled blocks (compilation alone can take minutes on "
                              "a small CPU); run the full preset or --only compiled",
                  "e2e": "the quick preset skips the runner's end-to-end tokens/s (building, warming and maybe "
                         "compiling the runner takes tens of seconds); run the full preset or --only e2e"}


@dataclass
class BenchOptions:
    quick: bool = False
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    flush_cache: bool = False
    threshold: float | None = None
    budget_s: float | None = None
    include_unverified: bool = False
    e2e_dtype: str | None = None
    model_dir: Path | None = None  # the serve group's model (None: the built-in one)

    @property
    def preset(self) -> Preset:
        return PRESETS["quick" if self.quick else "full"]


def parse_groups(values: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """'matmul,bandwidth' or repeated flags -> validated group names."""
    names = tuple(n.strip() for v in values for n in v.split(",") if n.strip())
    unknown = [n for n in names if n not in GROUPS]
    if unknown:
        raise BringupError(f"unknown bench group {', '.join(unknown)}; choose from {', '.join(GROUPS)}")
    return names


def select_groups(options: BenchOptions) -> tuple[list[str], dict[str, str]]:
    """Groups to run, and the groups left out with why."""
    only, skip = parse_groups(options.only), parse_groups(options.skip)
    chosen, left_out = [], {}
    for name in GROUPS:
        if only and name not in only:
            continue
        if name in skip:
            left_out[name] = "left out by --skip"
        elif options.quick and not only and name in QUICK_EXCLUDES:
            left_out[name] = QUICK_EXCLUDES[name]
        else:
            chosen.append(name)
    if not chosen:
        raise BringupError("--only/--skip leave no bench group to run; choose from " + ", ".join(GROUPS))
    return chosen, left_out


def harness_settings(options: BenchOptions) -> HarnessSettings:
    settings = options.preset.settings.with_changes(flush_cache=options.flush_cache)
    if options.threshold is not None:
        settings = settings.with_changes(rel_iqr_threshold=options.threshold)
    if options.budget_s is not None:
        settings = settings.with_changes(budget_s=options.budget_s)
    return settings


def build_context(device: torch.device, info: DeviceInfo, profile: Profile | None, options: BenchOptions,
                  on_step: Callable[[str], None]) -> tuple[BenchContext, HarnessSettingsModel]:
    settings = harness_settings(options)
    llc = llc_size(device, info.extra)
    flusher = CacheFlusher(device, 2 * llc.bytes) if settings.flush_cache else None
    harness = Harness.for_device(device, settings, flush=flusher)
    model = HarnessSettingsModel(**settings.to_dict(), flush_bytes=flusher.nbytes if flusher else None)
    ctx = BenchContext(device=device, info=info, harness=harness, preset=options.preset, profile=profile,
                       llc=llc, include_unverified=options.include_unverified, on_step=on_step,
                       e2e_dtype=options.e2e_dtype, model_dir=options.model_dir)
    return ctx, model


def run_group(name: str, ctx: BenchContext, settings: HarnessSettingsModel) -> BenchGroup:
    """Run one group; an unexpected failure becomes a skipped group with the reason (logged)."""
    start = time.perf_counter()
    try:
        with torch.no_grad():  # inference: no autograd bookkeeping in any measurement
            group = GROUPS[name](ctx)
    except Exception as exc:
        log.warning("bench group %s failed: %s", name, short_error(exc))
        group = BenchGroup(status="skipped", reason=f"failed: {short_error(exc)}")
    group.preset = ctx.preset.name
    group.settings = settings
    group.finished = now_iso()
    group.seconds = round(time.perf_counter() - start, 3)
    return group


def merge(previous: BenchSection | None, groups: dict[str, BenchGroup], device_name: str | None) -> BenchSection:
    """The new section: groups run now replace their old results, the others are kept; roofline redone."""
    section = BenchSection(groups=dict(previous.groups) if previous else {})
    section.groups.update(groups)
    apply_roofline(section, device_name)
    return section


@dataclass
class BenchRun:
    """What one `bringup bench` run produced."""

    section: BenchSection  # the profile's whole bench section after the run
    chosen: list[str]
    left_out: dict[str, str]
    settings: HarnessSettingsModel

    @property
    def current(self) -> BenchSection:
        """Only the groups measured in this run (with the section's ceilings and datasheet)."""
        return self.section.model_copy(update={"groups": {n: self.section.groups[n] for n in self.chosen}})


def run_bench_stage(device: torch.device, info: DeviceInfo, profile_path: Path, profile: Profile | None,
                    options: BenchOptions, *, force: bool = False,
                    on_step: Callable[[str], None] = lambda _text: None,
                    on_group_done: Callable[[str, BenchGroup], None] = lambda _name, _group: None) -> BenchRun:
    """Run the chosen groups, checkpointing finished groups into the profile (stage status partial) at
    least every CHECKPOINT_EVERY_S, and stamp the stage complete with the last one. `profile` is the
    profile read before the run (capabilities, ops)."""
    from bringup.profiles.store import update_profile

    chosen, left_out = select_groups(options)
    for name, why in left_out.items():
        log.info("bench group %s left out: %s", name, why)
    if profile is None or profile.capabilities is None:
        log.warning("the profile %s has no capabilities: matmul measures float32 only and attention the math "
                    "backend only; run `bringup probe` first for every supported dtype and backend", profile_path)
    ctx, settings = build_context(device, info, profile, options, on_step)
    log.info("bench on %s (%s), preset %s, groups %s; harness %s", device, info.name, options.preset.name,
             ", ".join(chosen), settings.model_dump())

    def store(groups: dict[str, BenchGroup], status: str) -> Profile:
        return update_profile(profile_path, info, lambda p: setattr(p, "bench", merge(p.bench, groups, info.name)),
                              stage="bench", status=status, force=force)

    pending: dict[str, BenchGroup] = {}
    measured: dict[str, BenchGroup] = {}
    last_write = time.perf_counter()
    saved: Profile | None = None
    for index, name in enumerate(chosen):
        if profile is not None and measured:  # later groups (e2e plans the runner) see this run's numbers
            ctx.profile = profile.model_copy(update={"bench": merge(profile.bench, measured, info.name)})
        pending[name] = measured[name] = run_group(name, ctx, settings)
        on_group_done(name, pending[name])
        last = index == len(chosen) - 1
        if last or time.perf_counter() - last_write >= CHECKPOINT_EVERY_S:
            saved = store(pending, "complete" if last else "partial")
            pending, last_write = {}, time.perf_counter()
    section = saved.bench if saved is not None and saved.bench is not None else BenchSection()
    return BenchRun(section=section, chosen=chosen, left_out=left_out, settings=settings)
