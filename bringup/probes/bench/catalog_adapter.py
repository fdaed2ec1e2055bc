"""Bridges to the verify-ops catalog and the compiled-check blocks (owned by the ops stage).

The bench groups only need "give me a zero-argument callable for this case on this device". These
adapters build one from `bringup.probes.ops` when that package offers it, and otherwise say why not,
so the groups skip with a reason instead of failing. Tests pass their own resolvers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

# (op, dtype, case label, device) -> zero-argument callable running that case
CaseResolver = Callable[[str, str, str, torch.device], Callable[[], Any]]
# (target, dtype, device) -> (function, args) of the composite block
BlockResolver = Callable[[str, str, torch.device], tuple[Callable[..., Any], list[Any]]]

CATALOG_FACTORIES = ("build_catalog", "default_catalog", "load_catalog", "catalog")
BLOCK_MODULES = ("bringup.probes.compiled", "bringup.probes.ops.compiled", "bringup.probes.ops.blocks")
BLOCK_FACTORIES = ("build_block", "make_block", "block_for")


def _find_catalog() -> Any:
    module = importlib.import_module("bringup.probes.ops.catalog")
    for name in CATALOG_FACTORIES:
        found = getattr(module, name, None)
        if found is not None:
            return found() if callable(found) else found
    if hasattr(module, "CATALOG"):
        return module.CATALOG
    raise AttributeError(f"bringup.probes.ops.catalog offers none of {', '.join(CATALOG_FACTORIES)}")


def catalog_case_resolver() -> tuple[CaseResolver | None, str | None]:
    """A resolver backed by the verify-ops catalog, or (None, why it is unavailable)."""
    try:
        catalog = _find_catalog()
        inputs = importlib.import_module("bringup.probes.ops.inputs")
    except Exception as exc:  # the ops stage is not in this build, or its API differs
        return None, f"the verify-ops catalog is not available in this build ({type(exc).__name__}: {exc})"

    def resolve(op: str, dtype: str, label: str, device: torch.device) -> Callable[[], Any]:
        spec = catalog.get(op)
        case = spec.case(label)
        args = case.inputs(inputs.generator("bench", op, dtype, label))
        args = inputs.cast_inputs(args, inputs.dtype_from_name(dtype), getattr(case, "keep_dtype", ()))
        args = inputs.to_device(args, device)
        if case.layout is not None:
            args = case.layout(args)
        fn = case.fn
        return lambda: fn(*args)

    return resolve, None


def compiled_block_resolver() -> tuple[BlockResolver | None, str | None]:
    """A resolver for the compiled check's composite blocks, or (None, why it is unavailable)."""
    problems = []
    for module_name in BLOCK_MODULES:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            problems.append(f"{module_name}: {type(exc).__name__}")
            continue
        for name in BLOCK_FACTORIES:
            factory = getattr(module, name, None)
            if callable(factory):
                return factory, None
        problems.append(f"{module_name} offers none of {', '.join(BLOCK_FACTORIES)}")
    return None, "the compiled check's blocks are not available in this build (" + "; ".join(problems) + ")"
