"""A device lost mid-run: after a step failed, each device the plan runs on is asked to compute one element and
read it back. One that cannot answer is lost, and the failure is named after it (the device and its error); one
that answers leaves the failure what it was. A fact measured after the failure, never read from the error's
wording or the device's name."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from bringup.errors import BringupError, exception_line


class DeviceLostError(BringupError):
    """A device the run needs stopped answering mid-run: the run ends with one line and exit status 1."""

    exit_code = 1


@dataclass(frozen=True)
class DeviceLoss:
    lost: dict[str, str]  # device -> the error it answered a one-element op with
    cause: str  # the step's failure, `Type: first line`

    @property
    def message(self) -> str:
        named = "; ".join(f"{device} no longer answers ({error})" for device, error in self.lost.items())
        step = "" if self.cause in self.lost.values() else f"; the step failed with {self.cause}"
        return (f"device lost mid-run: {named}{step}; the requests in flight on it were failed; check the device "
                "(driver, power, bus) and start again")


def plan_devices(plan: Any) -> list[str]:
    """The devices a plan runs on: a split's members, else the plan's one device (a replica's own)."""
    placement = getattr(getattr(plan, "placement", None), "value", None)
    if isinstance(placement, dict) and placement["mode"] != "replicas":
        return [member["device"] for member in placement["devices"]]
    device = getattr(plan, "device", None)
    return [device] if isinstance(device, str) else []


def answers(device: str) -> str | None:
    """None when `device` computes one element and reads it back; else its error, `Type: first line`."""
    try:
        value = (torch.ones(1, device=device) + 1).cpu()
    except Exception as exc:  # whatever the backend raises for a device that is gone
        return exception_line(exc)
    return None if float(value[0]) == 2.0 else f"one element computed as {float(value[0])}, not 2"


def device_loss(plan: Any, failure: BaseException) -> DeviceLoss | None:
    """The devices of `plan` that no longer answer after `failure`, or None when each still does."""
    lost = {device: error for device in plan_devices(plan) if (error := answers(device)) is not None}
    return DeviceLoss(lost, exception_line(failure)) if lost else None
