"""The spec's `numerics` field: legal-but-less-accurate and biased implementations of computed ops.

`numerics: {cumsum: stored_partials, mm: split_k, _softmax: "bias:0.005"}` replaces the device's kernel for the op
(every overload that reaches the device) by a kernel of its own, registered on PrivateUse1 through torch.library:

- `stored_partials` (cumsum, sum, mean): a sequential sum whose running total is rounded to the dtype after every
  step, as a GPU scan or a reduced-precision reduction stores it: legal, less accurate;
- `split_k` (mm, bmm, addmm, baddbmm): the inner dimension in 4 chunks, each chunk's product rounded to the dtype and
  the chunks summed in the dtype: legal, less accurate;
- `stored_exps` (_softmax, _log_softmax): each exp(x - max) rounded to the dtype before the float32 sum: legal;
- `one_pass` (native_layer_norm): mean and E[x^2] in one float32 pass, var = E[x^2] - mean^2: legal;
- `bias:F` (any of these ops, and `rsqrt` and `native_batch_norm`, the pieces rms_norm and layer_norm reach the
  device as): the host's kernel, its floating result times 1 + F formed in float32 and rounded
  once: a biased kernel (F = 0.005 is the 0.5 % a numerical judge must catch in the half dtypes).

The kernels compute on host copies of the arguments (`.cpu()`, which the device copies natively, so a host-fallback
detector sees no fallback) and write the result into the device output. This module never imports bringup.
"""

from __future__ import annotations

import warnings
from typing import Any

LEGAL = {
    "stored_partials": ("cumsum", "sum", "mean"),
    "split_k": ("mm", "bmm", "addmm", "baddbmm"),
    "stored_exps": ("_softmax", "_log_softmax"),
    "one_pass": ("native_layer_norm",),
}
# ops with only a biased variant: the pieces norms reach the device as (rms_norm's rsqrt, layer_norm's batch norm)
BIAS_ONLY = ("rsqrt", "native_batch_norm")
OPS = (*(op for ops in LEGAL.values() for op in ops), *BIAS_ONLY)
# the overloads each op reaches the device as (structured ops: their out= form)
OVERLOADS = {"cumsum": "cumsum.out", "sum": "sum.IntList_out", "mean": "mean.out", "mm": "mm.out", "bmm": "bmm.out",
             "addmm": "addmm.out", "baddbmm": "baddbmm.out", "_softmax": "_softmax.out",
             "_log_softmax": "_log_softmax.out", "native_layer_norm": "native_layer_norm", "rsqrt": "rsqrt.out",
             "native_batch_norm": "native_batch_norm"}
SPLITS = 4

_libraries: list[Any] = []


class NumericsError(ValueError):
    """A bad `numerics` field: one line naming the entry."""


def parse_numerics(raw: dict) -> dict[str, str]:
    value = raw.get("numerics", {})
    if not isinstance(value, dict):
        raise NumericsError("numerics: must be a mapping of op name to variant (stored_partials, split_k, "
                            "stored_exps, one_pass, or bias:F)")
    out = {}
    for name, variant in value.items():
        field = f"numerics[{name!r}]"
        op = str(name).removeprefix("aten::").removeprefix("aten.")
        if op not in OPS:
            raise NumericsError(f"{field}: no numeric variants for {name!r} (ops: {', '.join(OPS)})")
        out[op] = _variant(op, variant, field)
    return out


def _variant(op: str, variant: Any, field: str) -> str:
    text = str(variant).strip()
    if text.startswith("bias:"):
        try:
            fraction = float(text.removeprefix("bias:"))
        except ValueError:
            fraction = float("nan")
        if not -0.5 < fraction < 0.5:
            raise NumericsError(f"{field}: {variant!r} needs a fraction between -0.5 and 0.5 (bias:0.005)")
        return f"bias:{fraction!r}"
    if op not in LEGAL.get(text, ()):
        fits = [name for name, ops in LEGAL.items() if op in ops]
        raise NumericsError(f"{field}: {variant!r} is not a variant of {op} (use {' or '.join([*fits, 'bias:F'])})")
    return text


def install(numerics: dict[str, str]) -> None:
    """Register this process's variant kernels on the emu device (PrivateUse1)."""
    import torch

    from bringup_emu import numeric_kernels

    for op, variant in numerics.items():
        library = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the boxed fallback's
            library.impl(OVERLOADS[op], numeric_kernels.kernel_for(op, variant), "PrivateUse1")
        _libraries.append(library)
