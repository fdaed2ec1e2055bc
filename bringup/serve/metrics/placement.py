"""Metrics per device of the placement: the layers each device holds and its predicted time per token (from the
plan's placement row, which names every device --device gave, the left-out ones with 0 layers). A start on one
device has no placement row to read: the families come without samples."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

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



def replica_metrics(stats: dict) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """Per replica (a replicas placement's router stats): requests routed, tokens generated, its pace, lost or not."""
    replicas = stats.get("replicas") or []
    routed = CounterMetricFamily("bringup_replica_requests_routed", "Requests the router placed on each replica "
                                 "(by predicted completion).", labels=["device"])
    tokens = CounterMetricFamily("bringup_replica_tokens_generated", "Tokens each replica generated.",
                                 labels=["device"])
    pace = GaugeMetricFamily("bringup_replica_pace", "Each replica's steps' measured time over what its step costs "
                             "measured at the start predict (1: as predicted, or not yet measured); the router scales "
                             "its predictions by it.", labels=["device"])
    lost = GaugeMetricFamily("bringup_replica_lost", "1 once a replica's device stopped answering (its requests "
                             "failed; the others serve on).", labels=["device"])
    for replica in replicas:
        routed.add_metric([replica["device"]], replica["requests_routed"])
        tokens.add_metric([replica["device"]], replica["tokens_generated"])
        pace.add_metric([replica["device"]], replica.get("pace", 1.0))
        lost.add_metric([replica["device"]], 0 if replica["lost"] is None else 1)
    yield routed
    yield tokens
    yield pace
    yield lost
