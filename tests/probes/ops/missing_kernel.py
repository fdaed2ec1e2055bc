"""Test-only catalog plugin: a weight-only case exactly like _weight_int8pack_mm's, calling a kernel name no
torch has, through the catalog's own lookup (BRINGUP_OPS_PLUGINS=tests.probes.ops.missing_kernel)."""

from __future__ import annotations

from bringup.probes.ops.catalog.quantized import int8pack_case
from bringup.probes.ops.spec import OpSpec, op

MISSING = "_weight_int3pack_mm"


def ops() -> list[OpSpec]:
    return [op(MISSING, "quantized", [int8pack_case("decode", 1, 256, 64, kernel=MISSING)], dtypes=("float32",))]
