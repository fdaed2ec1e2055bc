"""A placement: which device holds which layers (or the whole model), the others left out with why, and the
predicted time per token it was chosen by. Plain data; `as_value` is what the plan's `placement` row holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bringup.runner.plan.placement.step_cost import StepCost

SINGLE, LAYER_SPLIT, REPLICAS = "single", "layer_split", "replicas"
AUTO = "auto"
PLACEMENT_MODES = {"auto": AUTO, "single": SINGLE, "split": LAYER_SPLIT, "replicas": REPLICAS}  # --placement


@dataclass(frozen=True)
class Member:
    device: str
    first: int  # the first and last decoder layer it holds
    last: int
    seconds_per_token: float  # predicted: its weights over its measured bandwidth
    need_bytes: int  # its weights, its share of the KV cache and the activation reserve
    evidence: str
    step_cost: StepCost | None = None  # a replica's measured step costs, which the router predicts from


@dataclass(frozen=True)
class Placement:
    mode: str
    members: tuple[Member, ...]  # in pipeline order
    left_out: tuple[tuple[str, str], ...]  # (device, why it is left out)
    crossing: str  # how activations cross between members ("" for one member)
    evidence: str
    prediction: dict[str, Any] | None = None  # replicas: the stated load, the predicted gain and each one's share

    @property
    def seconds_per_token(self) -> float:
        return sum(m.seconds_per_token for m in self.members)

    def as_value(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "devices": [{"device": m.device, "layers": [m.first, m.last], "need_bytes": m.need_bytes,
                         "predicted_s_per_token": m.seconds_per_token, "evidence": m.evidence,
                         **({"step_cost": m.step_cost.as_value()} if m.step_cost is not None else {})}
                        for m in self.members],
            "left_out": [{"device": device, "why": why} for device, why in self.left_out],
            "crossing": self.crossing,
            **({"prediction": self.prediction} if self.prediction is not None else {}),
        }


def shown_placement(value: Any) -> str:
    """The row as people read it: `emu:1 layers [0, 29]; left out: emu:0`."""
    if not isinstance(value, dict):
        return "one device"
    if value["mode"] == REPLICAS:
        held = ", ".join(f"{d['device']} replica {rank + 1}" for rank, d in enumerate(value["devices"]))
    else:
        held = ", ".join(f"{d['device']} layers [{d['layers'][0]}, {d['layers'][1]}]" for d in value["devices"])
    left = ", ".join(d["device"] for d in value["left_out"])
    return f"{value['mode']}: {held}" + (f"; left out: {left}" if left else "")
