"""A start whose placement splits the layers across devices (plan/placement/): the weights are read on the host,
then each run of layers moves to its device (engine/split_model.py); the free memory the KV cache is sized in is
the members' tightest, each holding its layers' share of every block."""

from __future__ import annotations

import torch

from bringup.backends.host import HOST
from bringup.backends.registry import backend_for
from bringup.runner.engine.options import EngineOptions
from bringup.runner.engine.split_model import split_across
from bringup.runner.engine.startup.free_memory import capped_free
from bringup.runner.model.decoder import DecoderModel
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.placement.placement import LAYER_SPLIT

Runs = list[tuple[torch.device, int, int]]


def split_runs(placement: Choice | None) -> Runs | None:
    """(device, first layer, last layer) of each member of a layer split in the plan's placement row; None when
    the model runs on one device (one device alone, or each replica of a replicas placement)."""
    value = placement.value if placement is not None else None
    if not isinstance(value, dict) or value["mode"] != LAYER_SPLIT:
        return None
    return [(torch.device(m["device"]), m["layers"][0], m["layers"][1]) for m in value["devices"]]


def load_device(placement: Choice | None, device: torch.device) -> torch.device:
    """Where the weights are read: the host for a split (no member holds them all), else the device."""
    return HOST if split_runs(placement) is not None else device


def split_loaded(model: DecoderModel, runs: Runs, options: EngineOptions) -> int | None:
    """The model moved to its members; the free memory, as one device's, that sizes the KV cache so each member
    holds its layers' share: min over members of free × layers / member's layers (None where one cannot say)."""
    split_across(model, runs)
    layers = model.config.num_layers
    shares = []
    for device, first, last in runs:
        free = capped_free(options, device, *backend_for(device).memory(device.index or 0))
        if free is None:
            return None
        shares.append(free * layers // (last - first + 1))
    return min(shares)
