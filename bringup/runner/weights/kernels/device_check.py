"""The start-up check of a device kind (int8_pack, int4_pack, fp8_scaled_mm) on the device and dtype that will serve
it: its product on a small random layer against its float64 reference from the same stored weight.

The probe's record proved the kernel on its own cases; this proves the runner's use of it (its packing, its views,
the scales' dtype) at the plan's activations. The bound is Higham's for a dot product of k terms, gamma_k * |x| |W|^T,
plus the output's rounding u * |y|, with u the unit roundoff of the dtype the kernel accumulates in (the
activations' dtype, float32 at least; float16's for the float8 product, whose accumulator may keep no more bits,
as verify-ops' _scaled_mm cases judge it). Checked at float32 too, where a kernel 1 % off is far outside the bound.
"""

from __future__ import annotations

import torch

from bringup.errors import exception_line
from bringup.runner.weights.kinds import FP8_ROWWISE, FP8_SCALED_MM, INT4_PACK_KERNELS
from bringup.runner.weights.registry import kind

ROWS, IN, OUT = 5, 64, 48


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# kinds whose product keeps fewer bits than the activations they are given: the float8 product (float16's, see
# above; the row-wise form's bfloat16 result) and int4's (computed in bfloat16 whatever the plan's dtype,
# formats/device_int4.py)
FEWER_BITS = {FP8_SCALED_MM: torch.float16, FP8_ROWWISE: torch.bfloat16,
              **{name: torch.bfloat16 for name in INT4_PACK_KERNELS}}


def _unit_roundoff(name: str, dtype: torch.dtype) -> float:
    accumulates = FEWER_BITS.get(name, dtype)
    return max(torch.finfo(accumulates).eps, torch.finfo(torch.float32).eps) / 2


def _why_at(name: str, device: torch.device, dtype: torch.dtype) -> str | None:
    gen = torch.Generator().manual_seed(53)
    w, b = torch.randn(OUT, IN, generator=gen) / IN ** 0.5, torch.randn(OUT, generator=gen)
    x = torch.randn(ROWS, IN, generator=gen).to(dtype)
    found = kind(name)
    try:
        stored = found.place(w.to(device=device, dtype=dtype))
        with torch.inference_mode():
            got = found.apply(x.to(device), stored, b.to(device=device, dtype=dtype)).cpu().double()
            want = found.reference(x, stored, b.to(dtype))
            weight = found.to_out_in(stored).cpu().double() if found.to_out_in else w.double()
    except Exception as exc:  # the kernel is missing here, refuses these arguments, or cannot read its codes back
        return f"it does not run at {_name(dtype)}: {exception_line(exc, 160)}"
    u = _unit_roundoff(name, dtype)
    gamma = IN * u / (1 - IN * u)
    bound = gamma * (x.double().abs() @ weight.abs().t() + b.to(dtype).double().abs()) + u * want.abs()
    error = (got - want).abs()
    if got.shape != want.shape or not bool(torch.all(error <= bound)):
        worst = float((error / bound).max()) if got.shape == want.shape else float("nan")
        return (f"its {_name(dtype)} result is outside the rounding bound of its float64 reference ({worst:.3g} x the "
                f"bound at worst, [{ROWS},{IN}] x [{OUT},{IN}])")
    return None


def device_kind_why_not(name: str, device: torch.device, dtype: torch.dtype) -> str | None:
    """None when kind `name` computes its reference's product on `device`, at float32 and at `dtype`; else why not."""
    for at in dict.fromkeys((torch.float32, dtype)):
        why = _why_at(name, device, at)
        if why:
            return why
    return None
