"""Catalog: softmax and normalisation, reductions and sampling helpers."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog_contracts import argmax_contract_cases, sort_contract_cases, topk_contract_cases
from bringup.probes.ops.inputs import randn, uniform
from bringup.probes.ops.spec import CaseSpec, OpSpec, op


def _transposed(args: list) -> list:
    return [args[0].t(), *args[1:]]


def _x(*shape: int, scale: float = 1.0):
    return lambda g: [randn(g, *shape, scale=scale)]


def softmax_like(fn, aten_out) -> list[CaseSpec]:
    """aten_out is the op's aten out= overload (aten._softmax.out / aten._log_softmax.out) for guard regions."""
    def case(label: str, make, dim: int, accum: int, layout=None) -> CaseSpec:
        return CaseSpec(label, make, lambda x: fn(x, dim=dim), layout=layout, accum=accum,
                        out=lambda x, *, out: aten_out(x, dim, False, out=out))

    return [
        case("attention probs [2,8,128,128] dim=-1", _x(2, 8, 128, 128, scale=3.0), -1, 128),
        case("vocab logits [2,32000] dim=-1", _x(2, 32000, scale=4.0), -1, 32000),
        case("odd [7,13,131] dim=-1", _x(7, 13, 131, scale=3.0), -1, 131),
        case("non-last dim [4,37,9] dim=1", _x(4, 37, 9, scale=3.0), 1, 37),
        case("transposed [64,33]^T dim=-1", _x(64, 33, scale=3.0), -1, 64, layout=_transposed),
        case("long [2,16384] dim=-1", _x(2, 16384, scale=3.0), -1, 16384),
        case("empty [0,128] dim=-1", _x(0, 128), -1, 128),
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

    layer_norm = op("layer_norm", "normalization", [
        CaseSpec("[4,128,1024] affine", _norm_inputs((4, 128, 1024)), ln, accum=1024),
        CaseSpec("odd [3,37,333] no affine", _norm_inputs((3, 37, 333), affine=False), ln, accum=333),
        CaseSpec("weight only [5,77]", _norm_inputs((5, 77), bias=False), ln, accum=77),
        CaseSpec("transposed input [96,40]^T", _norm_inputs((96, 40), affine=False), ln, layout=_transposed,
                 accum=96),
        CaseSpec("long [2,8192]", _norm_inputs((2, 8192)), ln, accum=8192),
        CaseSpec("empty [0,64]", _norm_inputs((0, 64)), ln, accum=64),
    ])

    def rms_cases(fn) -> list[CaseSpec]:
        return [
            CaseSpec("[4,128,1024]", _norm_inputs((4, 128, 1024), bias=False), fn, accum=1024),
            CaseSpec("odd [3,37,333]", _norm_inputs((3, 37, 333), bias=False), fn, accum=333),
            CaseSpec("decode [1,1,4096]", _norm_inputs((1, 1, 4096), bias=False), fn, accum=4096),
            CaseSpec("strided rows [64,256][::2]", _norm_inputs((64, 256), bias=False), fn,
                     layout=lambda a: [a[0][::2], *a[1:]], accum=256),
            CaseSpec("long [2,8192]", _norm_inputs((2, 8192), bias=False), fn, accum=8192),
            CaseSpec("empty [0,64]", _norm_inputs((0, 64), bias=False), fn, accum=64),
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
    cases = [
        CaseSpec("[4,128,1024] dim=-1", _x(4, 128, 1024), lambda x: fn(x, -1), accum=1024, judge=judge,
                 out=guard),
        CaseSpec("odd [37,131] dim=0 keepdim", _x(37, 131), lambda x: fn(x, 0, keepdim=True), accum=37,
                 judge=judge),
        CaseSpec("transposed [65,33]^T dim=-1", _x(65, 33), lambda x: fn(x, -1), layout=_transposed, accum=65,
                 judge=judge),
        CaseSpec("dims (0,2) [6,5,77]", _x(6, 5, 77), lambda x: fn(x, (0, 2)), accum=462, judge=judge),
        CaseSpec("long [3,16384] dim=-1", _x(3, 16384), lambda x: fn(x, -1), accum=16384, judge=judge),
    ]
    if empty_ok:
        cases.append(CaseSpec("empty reduced dim [3,0] dim=-1", _x(3, 0), lambda x: fn(x, -1), judge=judge))
    else:
        cases.append(CaseSpec("empty batch [0,9] dim=-1", _x(0, 9), lambda x: fn(x, -1), judge=judge))
    return cases


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
    argmax_cases = [
        CaseSpec("vocab logits [4,32000]", _x(4, 32000), lambda x: _argmax_value(x, -1),
                 ref=lambda x: _argmax_ref(x, -1), judge="exact"),
        CaseSpec("odd [37,131] dim=0 keepdim", _x(37, 131), lambda x: _argmax_value(x, 0, True),
                 ref=lambda x: _argmax_ref(x, 0, True), judge="exact"),
        CaseSpec("transposed [65,33]^T", _x(65, 33), lambda x: _argmax_value(x, -1),
                 ref=lambda x: _argmax_ref(x, -1), layout=_transposed, judge="exact"),
        CaseSpec("ties (rounded to 0.5 steps) [8,1000]", lambda g: [torch.round(randn(g, 8, 1000) * 2) / 2],
                 lambda x: _argmax_value(x, -1), ref=lambda x: _argmax_ref(x, -1), judge="exact"),
        CaseSpec("long [2,16384]", _x(2, 16384), lambda x: _argmax_value(x, -1),
                 ref=lambda x: _argmax_ref(x, -1), judge="exact"),
        CaseSpec("empty batch [0,9]", _x(0, 9), lambda x: _argmax_value(x, -1),
                 ref=lambda x: _argmax_ref(x, -1), judge="exact"),
        *argmax_contract_cases(),
    ]
    topk_cases = [
        CaseSpec("top-50 of vocab [4,32000]", _x(4, 32000), lambda x: _topk_check(x, 50), judge="exact"),
        CaseSpec("k=7 odd [37,131]", _x(37, 131), lambda x: _topk_check(x, 7), judge="exact"),
        CaseSpec("smallest k=3 transposed [65,33]^T", _x(65, 33), lambda x: _topk_check(x, 3, largest=False),
                 layout=_transposed, judge="exact"),
        CaseSpec("long [2,16384] k=16", _x(2, 16384), lambda x: _topk_check(x, 16), judge="exact"),
        CaseSpec("empty batch [0,9] k=2", _x(0, 9), lambda x: _topk_check(x, 2), judge="exact"),
        *topk_contract_cases(),
    ]
    sort_cases = [
        CaseSpec("descending vocab [2,32000]", _x(2, 32000), lambda x: _sort_check(x, True), judge="exact"),
        CaseSpec("ascending odd [37,131]", _x(37, 131), _sort_check, judge="exact"),
        # a stable sort's indices are fully determined, even among ties: compared exactly
        CaseSpec("stable with ties, indices exact [8,1000]", lambda g: [torch.round(randn(g, 8, 1000) * 2) / 2],
                 lambda x: torch.sort(x, dim=-1, stable=True), judge="exact"),
        CaseSpec("transposed [65,33]^T", _x(65, 33), _sort_check, layout=_transposed, judge="exact"),
        CaseSpec("long [16411]", _x(16411), _sort_check, judge="exact"),
        CaseSpec("empty [0,4]", _x(0, 4), _sort_check, judge="exact"),
        *sort_contract_cases(),
    ]

    def cumsum_case(label, shape, dim, accum, layout=None):
        return CaseSpec(label, _x(*shape), lambda x: torch.cumsum(x, dim), layout=layout, accum=accum,
                        out=lambda x, *, out: torch.cumsum(x, dim, out=out))

    cumsum = op("cumsum", "reduction", [
        cumsum_case("[4,1024] dim=-1", (4, 1024), -1, 1024),
        cumsum_case("odd [37,131] dim=0", (37, 131), 0, 37),
        cumsum_case("transposed [65,33]^T dim=-1", (65, 33), -1, 65, layout=_transposed),
        cumsum_case("long [16411]", (16411,), 0, 16411),
        cumsum_case("empty [0,3] dim=0", (0, 3), 0, 1),
    ])

    def probs(*shape: int, zero_every: int = 0):
        def make(g: torch.Generator) -> list:
            p = uniform(g, *shape, low=0.05, high=1.0)
            if zero_every:
                p[..., ::zero_every] = 0.0
            return [p]
        return make

    multinomial = op("multinomial", "sampling", [
        CaseSpec("200000 draws from [16] with zeros", probs(16, zero_every=5),
                 lambda p: torch.multinomial(p, 200000, replacement=True), judge="multinomial"),
        CaseSpec("50000 draws per row from [4,33]", probs(4, 33),
                 lambda p: torch.multinomial(p, 50000, replacement=True), judge="multinomial"),
        CaseSpec("8 without replacement from [64,100] with zeros", probs(64, 100, zero_every=3),
                 lambda p: torch.multinomial(p, 8, replacement=False), judge="multinomial"),
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
