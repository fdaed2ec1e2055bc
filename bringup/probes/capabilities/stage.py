"""The probe stage: run the selected checks (isolated by default) and report each as it finishes."""

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from bringup.fallbacks import FallbackRecorder
from bringup.probes.capabilities.isolation import IsolatedRunner, run_inline
from bringup.profiles.schema import Capabilities, Capability


def run_probe(
    check_ids: list[str],
    device: str,
    isolate: bool = True,
    timeout_s: float = 180.0,
    on_result: Callable[[str, dict[str, Any]], None] | None = None,
) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    runner = IsolatedRunner(timeout_s) if isolate else None
    with runner or nullcontext():
        for check_id in check_ids:
            result = runner.run(check_id, device) if runner else run_inline(check_id, device)
            results[check_id] = result
            if on_result:
                on_result(check_id, result)
    return results


def merge_into(capabilities: Capabilities | None, results: dict[str, dict[str, Any]]) -> Capabilities:
    merged = capabilities.model_copy(deep=True) if capabilities else Capabilities()
    groups = merged.groups()
    for check_id, result in results.items():
        group, _, name = check_id.partition(".")
        target = groups.get(group)
        if target is None:
            target = merged.features
            name = check_id
        target[name] = Capability.model_validate(result)
    return merged


def record_fallback(check_id: str, result: dict[str, Any], recorder: FallbackRecorder) -> None:
    """Log and count the fallback a check took (its details' `fallback`: the compile checks' eager path)."""
    taken = result.get("details", {}).get("fallback")
    if taken:
        recorder.record(taken["level"], f"{check_id}: {taken['what']}", taken["wanted"], taken["instead"],
                        taken["why"])
