"""The op catalog: every built-in op, plus test/extension plugins named by BRINGUP_OPS_PLUGINS.

BRINGUP_OPS_PLUGINS is a comma-separated list of importable module names. Each is imported in the
process that builds the catalog (the CLI and every isolated worker); a module may define
`ops() -> list[OpSpec]` whose entries are appended to the catalog, and importing it may have side
effects such as registering a torch.compile backend or overriding a kernel with torch.library.
The test suite uses it to inject cases that abort or hang, and a deliberately broken compiler.

BRINGUP_OPS_MODEL holds a model's shapes as JSON (ModelShapes.to_json, set by `verify-ops --model`): the
catalog then also has cases at those shapes (labels "model: ..."), in this process and in every worker,
which inherits the variable.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from dataclasses import replace
from functools import lru_cache

from bringup.probes.ops.catalog.attention import rotary_ops, sdpa_ops
from bringup.probes.ops.catalog.index import cast_op, gather_like_ops, kv_cache_ops
from bringup.probes.ops.catalog.matmul import matmul_ops
from bringup.probes.ops.catalog.model import MODEL, model_cases
from bringup.probes.ops.catalog.moe import moe_ops
from bringup.probes.ops.catalog.pointwise import activation_ops, elementwise_ops
from bringup.probes.ops.catalog.quantized import quantized_ops
from bringup.probes.ops.catalog.reduce import norm_ops, reduction_ops
from bringup.probes.ops.catalog.sampler import sampler_ops
from bringup.probes.ops.catalog.window import window_ops
from bringup.probes.ops.model_shapes import ModelShapes
from bringup.probes.ops.spec import CaseKey, Catalog, OpSpec

PLUGINS_ENV = "BRINGUP_OPS_PLUGINS"
MODEL_ENV = "BRINGUP_OPS_MODEL"


def builtin_ops() -> list[OpSpec]:
    return [
        *matmul_ops(), *quantized_ops(), *norm_ops(), *activation_ops(), *elementwise_ops(), *reduction_ops(),
        *gather_like_ops(), *kv_cache_ops(), cast_op(), *rotary_ops(), *sdpa_ops(), *moe_ops(), *window_ops(),
        *sampler_ops(),
    ]


def plugin_names() -> list[str]:
    return [name.strip() for name in os.environ.get(PLUGINS_ENV, "").split(",") if name.strip()]


def plugin_ops(names: Iterable[str]) -> list[OpSpec]:
    ops: list[OpSpec] = []
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            raise ValueError(f"{PLUGINS_ENV} names {name!r}, which cannot be imported ({exc}); fix or unset "
                             f"{PLUGINS_ENV}") from None
        factory = getattr(module, "ops", None)
        if callable(factory):
            ops.extend(factory())
    return ops


def with_model_cases(specs: list[OpSpec], shapes: ModelShapes) -> list[OpSpec]:
    """The specs with the model-shape cases appended to the ops they belong to."""
    extra = model_cases(shapes)
    return [replace(spec, cases=(*spec.cases, *extra[spec.name])) if spec.name in extra else spec for spec in specs]


def model_from_json(text: str) -> ModelShapes:
    try:
        return ModelShapes.from_json(text)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{MODEL_ENV} is not a model-shape description ({exc}); unset it and use "
                         "`bringup verify-ops --model DIR`") from None


@lru_cache(maxsize=4)
def _load(plugins: tuple[str, ...], model_json: str) -> Catalog:
    specs = builtin_ops()
    if model_json:
        specs = with_model_cases(specs, model_from_json(model_json))
    catalog = Catalog()
    for spec in [*specs, *plugin_ops(plugins)]:
        catalog.add(spec)
    return catalog


def load_catalog() -> Catalog:
    """The catalog for this process (built-ins + BRINGUP_OPS_PLUGINS [+ BRINGUP_OPS_MODEL's shapes]), built once
    per plugin set and model."""
    return _load(tuple(plugin_names()), os.environ.get(MODEL_ENV, "").strip())


def case_ids_by_label(catalog: Catalog) -> dict[tuple[str, str], str]:
    """(op, label) -> case id, for every case of the catalog."""
    return {(name, case.label): case.case_id for name, spec in catalog.ops.items() for case in spec.cases}


def is_model_case(label: str) -> bool:
    return label.startswith(MODEL)


def model_only_catalog(catalog: Catalog) -> Catalog:
    """The ops that have cases at the model's shapes, with only those cases (for --list --model)."""
    out = Catalog()
    for spec in catalog.ops.values():
        cases = tuple(c for c in spec.cases if is_model_case(c.label))
        if cases:
            out.add(replace(spec, cases=cases))
    return out


def select_cases(catalog: Catalog, ops: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
                 pattern: str | None = None, model_only: bool = False) -> list[CaseKey]:
    """Expand the catalog into case keys, filtered by op names, dtypes and a regex on 'op[dtype] case';
    model_only keeps the cases at the model's shapes (and, without --op, only ops that have them).

    Raises ValueError naming the unknown op or dtype.
    """
    op_names = list(ops) if ops else list(catalog.ops)
    if model_only and not ops:
        op_names = [name for name in op_names if any(is_model_case(c.label) for c in catalog.get(name).cases)]
    unknown = [name for name in op_names if name not in catalog.ops]
    if unknown:
        raise ValueError(f"unknown op(s) {', '.join(unknown)}; `bringup verify-ops --list` shows the catalog")
    wanted_dtypes = list(dtypes) if dtypes else None
    if wanted_dtypes:
        known = set(catalog.all_dtypes())
        bad = [d for d in wanted_dtypes if d not in known]
        if bad:
            raise ValueError(f"unknown dtype(s) {', '.join(bad)}; the catalog uses {', '.join(sorted(known))}")
    regex = re.compile(pattern) if pattern else None
    keys: list[CaseKey] = []
    for name in op_names:
        spec = catalog.get(name)
        for case in spec.cases:
            if model_only and not is_model_case(case.label):
                continue
            for dtype in spec.case_dtypes(case):
                if wanted_dtypes and dtype not in wanted_dtypes:
                    continue
                key = CaseKey(name, dtype, case.label, case.case_id)
                if regex and not regex.search(str(key)):
                    continue
                keys.append(key)
    return keys
