"""Reading one flag of an EngineConfig in a test: its value when set, its reason when left out (each fails the test
when the flag is in the other state, saying what it found)."""

from __future__ import annotations

from bringup.export.config import EngineConfig


def value(config: EngineConfig, name: str) -> str | None:
    found = config.setting(name)
    assert found is not None, f"{name} not set; left out: {config.left_out(name)}"
    return found.value


def reason_left_out(config: EngineConfig, name: str) -> str:
    assert config.setting(name) is None, f"{name} set: {config.setting(name)}"
    omitted = config.left_out(name)
    assert omitted is not None and omitted.reason, f"{name} neither set nor left out with a reason"
    return omitted.reason
