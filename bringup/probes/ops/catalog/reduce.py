"""Catalog: softmax and normalisation, reductions and sampling helpers."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog.contracts import argmax_contract_cases, sort_contract_cases, topk_contract_cases
from bringup.probes.ops.inputs import randn, uniform
from bringup.probes.ops.spec import CaseSpec, OpSpec, op, reduced_length, seen_shape


def _transposed(args: list) -> list:
    return [args[0].t(), *args[1:]]


def _x(*shape: int, scale: float = 1.0):
    return lambda g: [randn(g, *shape, scale=scale)]


def softmax_like(fn, aten_out) -> list[CaseSpec]:
    """aten_out is the op's aten out= overload (aten._softmax.out / aten._log_softmax.out) for guard regions."""
    def case(shape: tuple[int, ...], dim: int, role: str = "", scale: float = 3.0, transposed: bool = False
             ) -> CaseSpec:
        return CaseSpec(_x(*shape, scale=scale), lambda x: fn(x, dim=dim), shapes=(shape,), role=role,
                        view="transposed" if transposed else "", params=(("dim", dim),),
                        layout=_transposed if transposed else None,
                        accum=reduced_length(seen_shape(shape, transposed), dim),
                        out=lambda x, *, out: aten_out(x, dim, False, out=out))

    return [
        case((2, 8, 128, 128), -1, "attention probs"),
        case((2, 32000), -1, "vocab logits", scale=4.0),
        case((7, 13, 131), -1, "odd"),
        case((4, 37, 9), 1, "non-last dim"),
        case((64, 33), -1, transposed=True),
        case((2, 16384), -1, "long"),
        case((0, 128), -1, "empty", scale=1.0),
    ]


def rms_norm_composite(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Llama-style RMSNorm: statistics in at least float32, the result back in the input dtype."""
    compute = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(compute)
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return w * y.to(x.dtype)


def _norm_inputs(shape: tuple[int, ...], affine: bool = True, bias: bool = True):
    hidden = shape[-1]

    def make(g: torch.Generator) -> list:
        args = [randn(g, *shape, scale=2.0) + 0.5]
        if affine:
            args.append(uniform(g, hidden, low=0.5, high=1.5))
            args.append(randn(g, hidden, scale=0.1) if bias else None)
        return args
    return make


def norm_ops() -> list[OpSpec]:
    def ln(x, w=None, b=None):
        return F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5)

    def norm_case(fn, shape: tuple[int, ...], role: str = "", affine: bool = True, bias: bool = True,
                  view: str = "", layout=None, transposed: bool = False) -> CaseSpec:
        """The statistics run over the last dim of the shape the op sees."""
        seen = seen_shape(shape, transposed)
        return CaseSpec(_norm_inputs(shape, affine, bias), fn, shapes=(shape,), role=role,
                        view="transposed input" if transposed else view,
                        layout=_transposed if transposed else layout, accum=seen[-1])

    layer_norm = op("layer_norm", "normalization", [
        norm_case(ln, (4, 128, 1024), "affine"),
        norm_case(ln, (3, 37, 333), "odd no affine", affine=False),
        norm_case(ln, (5, 77), "weight only", bias=False),
        norm_case(ln, (96, 40), affine=False, transposed=True),
        norm_case(ln, (2, 8192), "long"),
        norm_case(ln, (0, 64), "empty"),
    ])

    def rms_cases(fn) -> list[CaseSpec]:
        return [
            norm_case(fn, (4, 128, 1024), bias=False),
            norm_case(fn, (3, 37, 333), "odd", bias=False),
            norm_case(fn, (1, 1, 4096), "decode", bias=False),
            norm_case(fn, (64, 256), bias=False, view="strided rows [::2]", layout=lambda a: [a[0][::2], *a[1:]]),
            norm_case(fn, (2, 8192), "long", bias=False),
            norm_case(fn, (0, 64), "empty", bias=False),
        ]

    def rms_fn(x, w, _unused=None):
        return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)

    def rms_comp(x, w, _unused=None):
        return rms_norm_composite(x, w)

    ops = [
        op("softmax", "normalization", softmax_like(torch.softmax, torch.ops.aten._softmax.out)),
        op("log_softmax", "normalization", softmax_like(torch.log_softmax, torch.ops.aten._log_softmax.out)),
        layer_norm,
        op("rms_norm", "normalization", rms_cases(rms_comp), note="composite, Llama style (fp32 statistics)"),
    ]
    if hasattr(F, "rms_norm"):
        ops.append(op("F.rms_norm", "normalization", rms_cases(rms_fn)))
    return ops


def _reduce_cases(fn, out_variant=None, judge="close", empty_ok=True) -> list[CaseSpec]:
    """out_variant(o, x, dim) is the reduction's out= form (guard-region check on the first case)."""
    guard = None
    if out_variant is not None:
        def guard(x, *, out):
            return out_variant(out, x, -1)

    def case(shape: tuple[int, ...], dims: int | tuple[int, ...], role: str = "", keepdim: bool = False,
             transposed: bool = False, out=None) -> CaseSpec:
        params = (("dim", dims), ("keepdim", True)) if keepdim else (("dim", dims),)
        return CaseSpec(_x(*shape), lambda x: fn(x, dims, keepdim=keepdim), shapes=(shape,), role=role,
                        view="transposed" if transposed else "", params=params,
                        layout=_transposed if transposed else None,
                        accum=reduced_length(seen_shape(shape, transposed), dims), judge=judge, out=out)

    return [
        case((4, 128, 1024), -1, out=guard),
        case((37, 131), 0, "odd", keepdim=True),
        case((65, 33), -1, transposed=True),
        case((6, 5, 77), (0, 2)),
        case((3, 16384), -1, "long"),
        case((3, 0), -1, "empty reduced dim") if empty_ok else case((0, 9), -1, "empty batch"),
    ]


def _argmax_value(x: torch.Tensor, dim: int, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Tie-robust check of argmax: the value at the returned index must equal the true max."""
    idx = torch.argmax(x, dim=dim, keepdim=True)
    value = x.gather(dim, idx)
    in_range = (idx >= 0) & (idx < x.shape[dim])
    if not keepdim:
        value, in_range = value.squeeze(dim), in_range.squeeze(dim)
    return value, in_range


def _argmax_ref(x: torch.Tensor, dim: int, keepdim: bool = False):
    value = torch.amax(x, dim=dim, keepdim=keepdim)
    return value, torch.ones_like(value, dtype=torch.bool)


def _topk_check(x: torch.Tensor, k: int, largest: bool = True):
    values, idx = torch.topk(x, k, dim=-1, largest=largest)
    return values, x.gather(-1, idx)


def _sort_check(x: torch.Tensor, descending: bool = False, stable: bool = False):
    values, idx = torch.sort(x, dim=-1, descending=descending, stable=stable)
    return values, x.gather(-1, idx)


def reduction_ops() -> list[OpSpec]:
    def exact_case(shape: tuple[int, ...], fn, role: str = "", ref=None, params=(), transposed: bool = False,
                   make=None) -> CaseSpec:
        return CaseSpec(make or _x(*shape), fn, shapes=(shape,), role=role, view="transposed" if transposed else "",
                        params=params, ref=ref, layout=_transposed if transposed else None, judge="exact")

    def argmax_case(shape: tuple[int, ...], role: str = "", dim: int = -1, keepdim: bool = False,
                    transposed: bool = False, make=None) -> CaseSpec:
        params = ((("dim", dim),) if dim != -1 else ()) + ((("keepdim", True),) if keepdim else ())
        return exact_case(shape, lambda x: _argmax_value(x, dim, keepdim), role,
                          ref=lambda x: _argmax_ref(x, dim, keepdim), params=params, transposed=transposed, make=make)

    def ties(*shape: int):
        """Values rounded to 0.5 steps: ties in every row."""
        return lambda g: [torch.round(randn(g, *shape) * 2) / 2]

    argmax_cases = [
        argmax_case((4, 32000), "vocab logits"),
        argmax_case((37, 131), "odd", dim=0, keepdim=True),
        argmax_case((65, 33), transposed=True),
        argmax_case((8, 1000), "ties", make=ties(8, 1000)),
        argmax_case((2, 16384), "long"),
        argmax_case((0, 9), "empty batch"),
        *argmax_contract_cases(),
    ]

    def topk_case(shape: tuple[int, ...], k: int, role: str = "", largest: bool = True,
                  transposed: bool = False) -> CaseSpec:
        params = (("k", k),) if largest else (("k", k), ("largest", False))
        return exact_case(shape, lambda x: _topk_check(x, k, largest=largest), role, params=params,
                          transposed=transposed)

    topk_cases = [
        topk_case((4, 32000), 50, "vocab"),
        topk_case((37, 131), 7, "odd"),
        topk_case((65, 33), 3, largest=False, transposed=True),
        topk_case((2, 16384), 16, "long"),
        topk_case((0, 9), 2, "empty batch"),
        *topk_contract_cases(),
    ]
    sort_cases = [
        exact_case((2, 32000), lambda x: _sort_check(x, True), "descending vocab"),
        exact_case((37, 131), _sort_check, "ascending odd"),
        # a stable sort's indices are fully determined, even among ties: compared exactly
        exact_case((8, 1000), lambda x: torch.sort(x, dim=-1, stable=True), "stable with ties, indices exact",
                   make=ties(8, 1000)),
        exact_case((65, 33), _sort_check, transposed=True),
        exact_case((16411,), _sort_check, "long"),
        exact_case((0, 4), _sort_check, "empty"),
        *sort_contract_cases(),
    ]

    def cumsum_case(shape: tuple[int, ...], dim: int, role: str = "", transposed: bool = False) -> CaseSpec:
        return CaseSpec(_x(*shape), lambda x: torch.cumsum(x, dim), shapes=(shape,), role=role,
                        view="transposed" if transposed else "", params=(("dim", dim),),
                        layout=_transposed if transposed else None,
                        accum=reduced_length(seen_shape(shape, transposed), dim),
                        out=lambda x, *, out: torch.cumsum(x, dim, out=out))

    cumsum = op("cumsum", "reduction", [
        cumsum_case((4, 1024), -1),
        cumsum_case((37, 131), 0, "odd"),
        cumsum_case((65, 33), -1, transposed=True),
        cumsum_case((16411,), 0, "long"),
        cumsum_case((0, 3), 0, "empty"),
    ])

    def probs(*shape: int, zero_every: int = 0):
        def make(g: torch.Generator) -> list:
            p = uniform(g, *shape, low=0.05, high=1.0)
            if zero_every:
                p[..., ::zero_every] = 0.0
            return [p]
        return make

    def draws(shape: tuple[int, ...], samples: int, replacement: bool, role: str = "", zero_every: int = 0
              ) -> CaseSpec:
        return CaseSpec(probs(*shape, zero_every=zero_every),
                        lambda p: torch.multinomial(p, samples, replacement=replacement), shapes=(shape,), role=role,
                        params=(("samples", samples), ("replacement", replacement)), judge="multinomial")

    multinomial = op("multinomial", "sampling", [
        draws((16,), 200000, True, "with zeros", zero_every=5),
        draws((4, 33), 50000, True, "per row"),
        draws((64, 100), 8, False, "with zeros", zero_every=3),
    ], note="judged statistically: chi-square goodness of fit at alpha=1e-6, never elementwise")

    return [
        op("sum", "reduction", _reduce_cases(torch.sum, out_variant=lambda o, x, d: torch.sum(x, d, out=o))),
        op("mean", "reduction", _reduce_cases(torch.mean, out_variant=lambda o, x, d: torch.mean(x, d, out=o))),
        op("amax", "reduction", _reduce_cases(torch.amax, judge="exact", empty_ok=False,
                                              out_variant=lambda o, x, d: torch.amax(x, d, out=o))),
        op("argmax", "reduction", argmax_cases, note="judged by the value at the returned index (tie-robust); "
                                                     "'contract:' cases: the documented first index on ties"),
        op("var", "reduction", _reduce_cases(torch.var)),
        cumsum,
        op("topk", "reduction", topk_cases, note="values exact; input gathered at the indices equals values; "
                                                 "'contract:' cases: sorted=True order with ties"),
        op("sort", "reduction", sort_cases, note="values exact; input gathered at the indices equals values; "
                                                 "'contract:' cases: stable=True keeps ties in input order"),
        multinomial,
    ]
