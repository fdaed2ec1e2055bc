"""Every probe check by id (`group.name`), and selection with --only / --skip."""

import importlib
import os
from collections.abc import Callable
from typing import Any

import torch

from bringup.errors import BringupError
from bringup.probes.capabilities.backend_attention import all_attention_checks
from bringup.probes.capabilities.compile_check import compile_checks
from bringup.probes.capabilities.dtypes import dtype_checks
from bringup.probes.capabilities.features import feature_checks
from bringup.probes.capabilities.memory import memory_checks

CheckFn = Callable[[torch.device], dict[str, Any]]
GROUPS: dict[str, Callable[[], dict[str, CheckFn]]] = {
    "dtypes": dtype_checks,
    "memory": memory_checks,
    "attention": all_attention_checks,
    "compile": compile_checks,
    "features": feature_checks,
}
# Diagnostics hook: "group.name=module:function,..." adds checks (used by tests to inject hangs and crashes).
EXTRA_CHECKS_ENV = "BRINGUP_EXTRA_PROBE_CHECKS"


def extra_checks() -> dict[str, str]:
    spec = os.environ.get(EXTRA_CHECKS_ENV, "").strip()
    pairs = [item.split("=", 1) for item in spec.split(",") if item.strip()]
    return {name.strip(): target.strip() for name, target in pairs}


def all_check_ids() -> list[str]:
    ids = [f"{group}.{name}" for group, make in GROUPS.items() for name in make()]
    return ids + [i for i in extra_checks() if i not in ids]


def resolve(check_id: str) -> CheckFn:
    extra = extra_checks()
    if check_id in extra:
        module_name, _, attr = extra[check_id].partition(":")
        return getattr(importlib.import_module(module_name), attr)
    group, _, name = check_id.partition(".")
    return GROUPS[group]()[name]


def matches(check_id: str, names: list[str]) -> bool:
    group = check_id.split(".", 1)[0]
    return any(n in (check_id, group) for n in names)


def select_checks(only: list[str] | None, skip: list[str] | None) -> list[str]:
    ids = all_check_ids()
    known = set(ids) | {i.split(".", 1)[0] for i in ids}
    for name in (only or []) + (skip or []):
        if name not in known:
            raise BringupError(
                f"unknown probe check {name!r}; choose a group ({', '.join(GROUPS)}) or a check id "
                f"such as {ids[0]} (`bringup probe --list` shows all)"
            )
    if only:
        ids = [i for i in ids if matches(i, only)]
    if skip:
        ids = [i for i in ids if not matches(i, skip)]
    return ids
