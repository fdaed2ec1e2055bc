"""The op catalog: every built-in op, plus test/extension plugins named by BRINGUP_OPS_PLUGINS.

BRINGUP_OPS_PLUGINS is a comma-separated list of importable module names. Each is imported in the
process that builds the catalog (the CLI and every isolated worker); a module may define
`ops() -> list[OpSpec]` whose entries are appended to the catalog, and importing it may have side
effects such as registering a torch.compile backend or overriding a kernel with torch.library.
The test suite uses it to inject cases that abort or hang, and a deliberately broken compiler.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from functools import lru_cache

from bringup.probes.ops.catalog_attention import rotary_ops, sdpa_ops
from bringup.probes.ops.catalog_index import cast_op, gather_like_ops, kv_cache_ops
from bringup.probes.ops.catalog_matmul import matmul_ops
from bringup.probes.ops.catalog_pointwise import activation_ops, elementwise_ops
from bringup.probes.ops.catalog_reduce import norm_ops, reduction_ops
from bringup.probes.ops.spec import CaseKey, Catalog, OpSpec

PLUGINS_ENV = "BRINGUP_OPS_PLUGINS"


def builtin_ops() -> list[OpSpec]:
    return [
        *matmul_ops(), *norm_ops(), *activation_ops(), *elementwise_ops(), *reduction_ops(),
        *gather_like_ops(), *kv_cache_ops(), cast_op(), *rotary_ops(), *sdpa_ops(),
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


@lru_cache(maxsize=4)
def _load(plugins: tuple[str, ...]) -> Catalog:
    catalog = Catalog()
    for spec in [*builtin_ops(), *plugin_ops(plugins)]:
        catalog.add(spec)
    return catalog


def load_catalog() -> Catalog:
    """The catalog for this process (built-ins + BRINGUP_OPS_PLUGINS), built once per plugin set."""
    return _load(tuple(plugin_names()))


def select_cases(catalog: Catalog, ops: Iterable[str] | None = None, dtypes: Iterable[str] | None = None,
                 pattern: str | None = None) -> list[CaseKey]:
    """Expand the catalog into case keys, filtered by op names, dtypes and a regex on 'op[dtype] case'.

    Raises ValueError naming the unknown op or dtype.
    """
    op_names = list(ops) if ops else list(catalog.ops)
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
            for dtype in spec.case_dtypes(case):
                if wanted_dtypes and dtype not in wanted_dtypes:
                    continue
                key = CaseKey(name, dtype, case.label)
                if regex and not regex.search(str(key)):
                    continue
                keys.append(key)
    return keys
