"""dtype checks: a small matmul and an elementwise op on the device against a float64 CPU reference."""

from collections.abc import Callable
from typing import Any

import torch

from bringup.probes.capabilities.numerics import all_finite, relative_error, seeded_randn
from bringup.probes.capabilities.result import error_text, supported, unsupported

MATMUL_K = 64

# Allowed error relative to the largest reference value. The inputs are rounded to the dtype first, so this
# bounds only the computation; K=64 accumulations give a few units of the dtype's epsilon.
FLOAT_TOLERANCE = {
    "float64": 1e-12,
    "float32": 1e-4,
    "float16": 1e-2,
    "bfloat16": 5e-2,
}
FLOAT8_TOLERANCE = 0.25  # 3-bit mantissa: the output itself is rounded to ~6 % and sums shift further


def float_dtype_names() -> list[str]:
    names = ["float32", "float64", "float16", "bfloat16"]
    names += sorted(n for n in dir(torch) if n.startswith("float8_") and isinstance(getattr(torch, n), torch.dtype))
    return names


def tolerance_for(name: str) -> float:
    return FLOAT_TOLERANCE.get(name, FLOAT8_TOLERANCE)


def run_float_op(label: str, op: Callable[[], torch.Tensor], reference: torch.Tensor, tol: float) -> dict[str, Any]:
    try:
        out = op()
    except Exception as exc:
        return {"ok": False, "why": f"{label} raised {error_text(exc)}"}
    if out.shape != reference.shape:
        return {"ok": False, "why": f"{label} returned shape {tuple(out.shape)}, expected {tuple(reference.shape)}"}
    if not all_finite(out):
        return {"ok": False, "why": f"{label} returned non-finite values"}
    _, max_rel = relative_error(out, reference)
    ok = max_rel <= tol
    return {"ok": ok, "max_rel": max_rel, "why": "" if ok else f"{label} error {max_rel:.3g} > tolerance {tol:g}"}


def check_float_dtype(device: torch.device, name: str) -> dict[str, Any]:
    dtype = getattr(torch, name)
    tol = tolerance_for(name)
    a32, b32 = seeded_randn(48, MATMUL_K, seed=1), seeded_randn(MATMUL_K, 40, seed=2)
    try:
        a, b = a32.to(dtype), b32.to(dtype)
        ref_a, ref_b = a.to(torch.float64), b.to(torch.float64)
        da, db = a.to(device), b.to(device)
    except Exception as exc:
        return unsupported(f"cannot create or move {name} tensors: {error_text(exc)}")
    matmul = run_float_op("matmul 48x64 @ 64x40", lambda: da @ db, ref_a @ ref_b, tol)
    elementwise = run_float_op("(a*a + a) elementwise", lambda: da * da + da, ref_a * ref_a + ref_a, tol)
    details = {"tolerance": tol, **{f"{k}_rel_err": v.get("max_rel") for k, v in
                                    (("matmul", matmul), ("elementwise", elementwise))}}
    failures = [r["why"] for r in (matmul, elementwise) if not r["ok"]]
    if failures:
        return unsupported("; ".join(failures), **details)
    return supported(
        f"matmul 48x64@64x40 vs fp64: max_rel {matmul['max_rel']:.2e}; "
        f"elementwise a*a+a: max_rel {elementwise['max_rel']:.2e} (tolerance {tol:g})",
        **details,
    )


def int8_matmul(da: torch.Tensor, db: torch.Tensor) -> tuple[torch.Tensor, str]:
    """Plain `@` where the device implements it, else torch._int_mm (int8 x int8 -> int32, the LLM path)."""
    try:
        return da @ db, "int8 @"
    except (NotImplementedError, RuntimeError) as plain_error:
        int_mm = getattr(torch, "_int_mm", None)
        if int_mm is None:
            raise plain_error from None
        return int_mm(da, db), f"torch._int_mm ({error_text(plain_error)[:60]} for plain @)"


def check_int8(device: torch.device) -> dict[str, Any]:
    gen = torch.Generator().manual_seed(3)
    a = torch.randint(-1, 2, (32, 16), generator=gen, dtype=torch.int8)
    b = torch.randint(-1, 2, (16, 24), generator=gen, dtype=torch.int8)
    c = torch.randint(-60, 61, (32, 16), generator=gen, dtype=torch.int8)
    expected_mm = a.long() @ b.long()
    expected_add = a.long() + c.long()
    try:
        da, db, dc = a.to(device), b.to(device), c.to(device)
        product, path = int8_matmul(da, db)
        got_mm = product.cpu().long()
        got_add = (da + dc).cpu().long()
    except Exception as exc:
        return unsupported(f"int8 matmul/add raised {error_text(exc)}")
    wrong_mm = int((got_mm != expected_mm).sum())
    wrong_add = int((got_add != expected_add).sum())
    if wrong_mm or wrong_add:
        return unsupported(f"int8 results wrong: {wrong_mm} matmul and {wrong_add} add elements differ")
    return supported(f"int8 matmul 32x16@16x24 via {path} and add: exact against int64 reference", matmul=path)


def dtype_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    checks: dict[str, Callable[[torch.device], dict[str, Any]]] = {
        name: (lambda device, n=name: check_float_dtype(device, n)) for name in float_dtype_names()
    }
    checks["int8"] = check_int8
    return checks
