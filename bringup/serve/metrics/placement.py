"""Metrics per device of the placement: the layers each device holds and its predicted time per token (from the
plan's placement row, which names every device --device gave, the left-out ones with 0 layers). A start on one
device has no placement row to read: the families come without samples."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from bringup.runner.plan.plan import ExecutionPlan


def placement_metrics(plan: ExecutionPlan) -> Iterator[GaugeMetricFamily]:
    value = plan.placement.value
    devices = value["devices"] if isinstance(value, dict) else []
    layers = GaugeMetricFamily("bringup_device_layers", "Decoder layers each device holds (0: left out by the "
                               "placement; see /v1/plan for why).", labels=["device"])
    predicted = GaugeMetricFamily("bringup_device_predicted_seconds_per_token", "The placement's predicted decode "
                                  "time per token on each device it uses (its weights over its measured bandwidth).",
                                  labels=["device"])
    for member in devices:
        first, last = member["layers"]
        layers.add_metric([member["device"]], last - first + 1)
        predicted.add_metric([member["device"]], member["predicted_s_per_token"])
    for left in value["left_out"] if isinstance(value, dict) else []:
        layers.add_metric([left["device"]], 0)
    yield layers
    yield predicted

