"""The runner plan: the draft the runner would build from this profile for the built-in model (each setting
with its evidence), and the plan the end-to-end bench actually ran with, when the profile recorded one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bringup.errors import exception_line
from bringup.profiles.schema import Profile
from bringup.runner.model.config.builtin import builtin_config
from bringup.runner.plan.plan import build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.settings import UNDRAFTED

DRAFT_NOTE = ("draft for the built-in model, from this profile alone; at start-up the runner also measures the "
              "weight layout and sizes the KV cache from free memory")


@dataclass
class PlanRow:
    setting: str
    value: str
    evidence: str
    before: str | None = None  # the baseline's value when it differs


@dataclass
class PlanView:
    rows: list[PlanRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    refused: str | None = None  # why no plan could be built from this profile
    ran_with: dict[str, str] = field(default_factory=dict)  # the e2e bench's plan, setting -> value
    note: str = DRAFT_NOTE


def draft_rows(profile: Profile) -> tuple[list[PlanRow], list[str]]:
    """The plan settings drafted from the profile alone (torch-free: no device, no weights), and its warnings."""
    device = profile.device.id if profile.device else "?"
    plan = build_plan(ProfileFacts(profile), "report", device, builtin_config(), None, None)
    rows = [PlanRow(name, str(value), evidence) for name, value, evidence in plan.rows()
            if name not in UNDRAFTED]
    return rows, list(plan.warnings)


def recorded_plan(profile: Profile) -> dict[str, str]:
    records = profile.bench.records("e2e") if profile.bench else []
    for record in records:
        plan: Any = record.params.get("plan")
        if record.status == "ok" and isinstance(plan, dict):
            return {str(k): str(v) for k, v in plan.items()}
    return {}


def plan_view(profile: Profile) -> PlanView:
    view = PlanView(ran_with=recorded_plan(profile))
    if profile.device is None and profile.capabilities is None:
        view.refused = "the profile has no device and no capabilities: nothing to plan from"
        return view
    try:
        view.rows, view.warnings = draft_rows(profile)
    except Exception as exc:  # a profile whose evidence rules out every path: the report says so and goes on
        view.refused = exception_line(exc)
    return view
