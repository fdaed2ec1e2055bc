"""A replicas placement started: one engine per member device, each built (and later stepped) on a thread of its
own, one after another so that no start-up measurement runs beside another; the router serves them, predicting
from the step costs the placement measured on each device (its row holds them)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import torch

from bringup.backends.registry import backend_for
from bringup.log import get_logger
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.engine.replicas.router import ReplicaRouter
from bringup.runner.engine.startup.context import StartInputs
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.placement.placement import REPLICAS
from bringup.runner.plan.placement.step_cost import step_cost_from

log = get_logger("runner.placement")


def runs_replicas(placement: Choice | None) -> bool:
    value = None if placement is None else placement.value
    return isinstance(value, dict) and value["mode"] == REPLICAS


def start_replicas(start_on: Callable[..., Any], cls: Callable[..., Any], inputs: StartInputs) -> ReplicaRouter:
    assert inputs.placement is not None
    replicas = []
    for member in inputs.placement.value["devices"]:
        device = torch.device(member["device"])
        thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"bringup-replica-{device}")
        info = backend_for(device).device_info(device.index or 0)
        on_device = replace(inputs, options=replace(inputs.options, device=member["device"]), device=device,
                            info=info)
        log.info("replica on %s: starting", device)
        engine = thread.submit(start_on, cls, on_device).result()
        cost = step_cost_from(member["step_cost"]) if "step_cost" in member else None  # measured at the start
        replicas.append(Replica(member["device"], engine, thread, member["predicted_s_per_token"], cost=cost))
    return ReplicaRouter(replicas)
