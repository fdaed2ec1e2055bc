"""A replicas placement started: one engine per member device, each built (and later stepped) on a thread of its
own, one after another so that no start-up measurement runs beside another; then each engine's step costs are timed
on the engine itself (replicas/engine_costs.py), the replicas in turn, and the router serves them, predicting from
those. The placement row keeps the start's costs it was decided by and gains each device's `router_step_cost`."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import torch

from bringup.backends.registry import backend_for
from bringup.log import get_logger
from bringup.runner.engine.replicas.engine_costs import time_on_engines
from bringup.runner.engine.replicas.replica import Replica
from bringup.runner.engine.replicas.router import ReplicaRouter
from bringup.runner.engine.startup.context import StartInputs
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.placement.placement import REPLICAS
from bringup.runner.plan.placement.replica_load import ReplicaLoad, stated_load
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
    log.info("replicas: timing each engine's steps for the router")
    time_on_engines(replicas, _load(inputs.placement.value, replicas))
    router = ReplicaRouter(replicas)
    timed = {r.device: r.cost.as_value() for r in replicas if r.cost is not None}
    value = {**inputs.placement.value, "devices": [{**member, "router_step_cost": timed[member["device"]]}
                                                   for member in inputs.placement.value["devices"]]}
    router.plan = replace(router.plan, placement=replace(inputs.placement, value=value))
    return router


def _load(value: dict[str, Any], replicas: list[Replica]) -> ReplicaLoad:
    """The load the placement was weighed for, or (a forced placement weighs none) the stated load."""
    if "prediction" in value and "load" in value["prediction"]:
        return ReplicaLoad(**value["prediction"]["load"])
    first = replicas[0].engine.plan
    return stated_load(first.max_model_len.value, first.max_num_seqs.value)
