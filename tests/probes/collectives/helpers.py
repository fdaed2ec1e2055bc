"""Shared helpers for the collectives tests: a small plan, a launch, and the no-orphan check."""

import psutil

from bringup.probes.collectives.backend_choice import BackendChoice
from bringup.probes.collectives.plan import Plan
from bringup.probes.collectives.ranks.launcher import LaunchOutcome, launch
from bringup.probes.collectives.report import build_section
from bringup.profiles.sections.collectives import CollectivesSection

GLOO = BackendChoice("gloo", "test", "cpu")


def small_plan(timeout_s: float = 30.0, **overrides) -> Plan:
    fields = dict(backend="gloo", device_type="cpu", dtypes=["float32"], sizes=[4096], warmup=1, iters=2,
                  timeout_s=timeout_s)
    fields.update(overrides)
    return Plan(**fields)


def run(plan: Plan, world: int, **kwargs) -> tuple[LaunchOutcome, CollectivesSection]:
    outcome = launch(plan, world, startup_timeout_s=120.0, **kwargs)
    return outcome, build_section(plan, outcome, GLOO, kwargs.get("start_method", "fork"))


# Children that outlive single tests by design (multiprocessing's resource tracker, started by any spawn
# context earlier in the session); the autouse fixture in conftest.py records them before each test.
PREEXISTING: set[int] = set()


def new_children() -> list[psutil.Process]:
    """Children of this test process that did not exist when the test started."""
    return [p for p in psutil.Process().children(recursive=True)
            if p.pid not in PREEXISTING and not is_resource_tracker(p)]


def is_resource_tracker(process: psutil.Process) -> bool:
    try:
        return any("resource_tracker" in part for part in process.cmdline())
    except psutil.Error:
        return False


def assert_no_process_left(outcome: LaunchOutcome) -> None:
    """No child started by this test survives, and no rank pid is still a live process."""
    children = new_children()
    assert children == [], f"left behind: {children}"
    assert len(outcome.pids) == outcome.world_size
    for pid in outcome.pids.values():
        if psutil.pid_exists(pid):
            try:
                status = psutil.Process(pid).status()
            except psutil.NoSuchProcess:
                continue
            raise AssertionError(f"rank pid {pid} is still alive ({status})")
