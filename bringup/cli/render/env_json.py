"""`bringup env --json`: the report's facts as typed values. The profile keeps them as the text a person reads;
a program gets numbers as numbers, true/false as booleans, lists as arrays and null where a fact is absent."""

from __future__ import annotations

import re
from typing import Any

from bringup.probes.env_facts.report import Sections

# what the collectors write where a tool, package or fact is not there
ABSENT = frozenset({"not found", "not installed", "none found", "unknown", "not set", ""})
LIST_KEYS = frozenset({"not_set", "isa_features", "isa_absent", "enabled_features"})
INTEGER = re.compile(r"-?\d+")
DECIMAL = re.compile(r"-?\d+\.\d+")


def typed_value(key: str, text: str) -> Any:
    """One fact as JSON: `"1"` → 1, `"True"` → true, `"not found"` → null, space-separated names → a list."""
    value = text.strip()
    if value in ABSENT:
        return None
    if key in LIST_KEYS:
        return value.split()
    if value in ("True", "False"):
        return value == "True"
    if INTEGER.fullmatch(value):
        return int(value)
    if DECIMAL.fullmatch(value):
        return float(value)
    return value


def typed_facts(facts: dict[str, str]) -> dict[str, Any]:
    return {key: typed_value(key, text) for key, text in facts.items()}


def typed_sections(sections: Sections) -> dict[str, dict[str, Any]]:
    """Every section typed, except the variables: an environment variable's value is text whatever it looks like."""
    typed = {name: typed_facts(facts) for name, facts in sections.items()}
    if "variables" in sections:
        typed["variables"] = {key: typed_value(key, text) if key in LIST_KEYS else text
                              for key, text in sections["variables"].items()}
    return typed
