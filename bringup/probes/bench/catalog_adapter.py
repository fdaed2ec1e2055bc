"""Bridges to the verify-ops catalog and the compiled check's blocks (owned by the ops stage).

The bench groups only need "a zero-argument callable for this case on this device". These adapters
build one from `bringup.probes.ops` (catalog: load_catalog().get(op).case(label); inputs:
generator/prepare_inputs) and `bringup.probes.ops.compiled.blocks.BLOCKS` when this build has them,
and otherwise say why not, so the groups skip with a reason instead of failing. Imports are lazy:
bench works (and says so) in a build without the ops stage. Tests pass their own resolvers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch

# (op, dtype, case label, device) -> zero-argument callable running that case
CaseResolver = Callable[[str, str, str, torch.device], Callable[[], Any]]
# (target, case label or None for a composite block, dtype, device) -> (function, args)
BlockResolver = Callable[[str, "str | None", str, torch.device], tuple[Callable[..., Any], list[Any]]]


def _ops_modules() -> tuple[Any, Any]:
    catalog = importlib.import_module("bringup.probes.ops.catalog")
    inputs = importlib.import_module("bringup.probes.ops.inputs")
    return catalog, inputs


def case_function(catalog_module: Any, inputs: Any, op: str, label: str, dtype: str,
                  device: torch.device) -> tuple[Callable[..., Any], list[Any]]:
    """(fn, device args) of one catalog case, with the same seeded inputs verify-ops used."""
    spec = catalog_module.load_catalog().get(op)
    case = spec.case(label)
    raw = case.inputs(inputs.generator(*spec.seed_parts(case)))
    args, _reference = inputs.prepare_inputs(raw, inputs.dtype_from_name(dtype), device, case.keep_dtype,
                                             case.layout)
    return case.fn, args


def catalog_case_resolver() -> tuple[CaseResolver | None, str | None]:
    """A resolver backed by the verify-ops catalog, or (None, why it is unavailable)."""
    try:
        catalog_module, inputs = _ops_modules()
    except Exception as exc:  # the ops stage is not in this build
        return None, f"the verify-ops catalog is not available in this build ({type(exc).__name__}: {exc})"

    def resolve(op: str, dtype: str, label: str, device: torch.device) -> Callable[[], Any]:
        fn, args = case_function(catalog_module, inputs, op, label, dtype, device)
        return lambda: fn(*args)

    return resolve, None


def compiled_block_resolver() -> tuple[BlockResolver | None, str | None]:
    """A resolver for the compiled check's targets (blocks and op cases), or (None, why not)."""
    try:
        catalog_module, inputs = _ops_modules()
        blocks = importlib.import_module("bringup.probes.ops.compiled.blocks")
    except Exception as exc:
        return None, f"the compiled check is not available in this build ({type(exc).__name__}: {exc})"

    def resolve(target: str, label: str | None, dtype: str, device: torch.device):
        if label is not None:
            return case_function(catalog_module, inputs, target, label, dtype, device)
        block = blocks.BLOCKS[target]
        raw = block.inputs(inputs.generator("block", block.name))
        torch_dtype = inputs.dtype_from_name(dtype)
        args, _reference = inputs.prepare_inputs(raw, torch_dtype, device)
        fn = block.build(torch_dtype, device) if block.build is not None else block.fn
        return fn, args

    return resolve, None
