"""Catalog cases at one model's own shapes (`verify-ops --model DIR`): extra cases of the existing ops,
labelled "model: ..." with the shapes, so their records read like any other op's.

The float64 CPU reference bounds what is sane to run: a tensor holds at most MAX_ELEMENTS elements and a
matmul costs at most MAX_REFERENCE_FLOPS; a dimension cut to fit says so in its label ("capped").
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog_attention import (
    SDPA_BACKENDS,
    _qkv,
    _sdpa,
    apply_rotary,
    attention_reference,
    rotary_tables,
)
from bringup.probes.ops.catalog_moe import (
    combine_case,
    group_case,
    grouped_matmul_cases,
    index_add,
    router_case,
    scatter_add,
)
from bringup.probes.ops.catalog_reduce import rms_norm_composite
from bringup.probes.ops.catalog_window import softcap_case, window_case
from bringup.probes.ops.inputs import randint, randn, uniform
from bringup.probes.ops.model_shapes import ModelShapes
from bringup.probes.ops.spec import MODEL_CASE_PREFIX as MODEL
from bringup.probes.ops.spec import CaseSpec

MAX_ELEMENTS = 1 << 26  # 512 MiB per float64 tensor
MAX_REFERENCE_FLOPS = 1 << 34  # ~17 GFLOP: seconds for a float64 CPU matmul
PREFILL_TOKENS = 128
ATTENTION_PREFILL = 512
CONTEXTS = (256, 4096, 32768)
LOGIT_ROWS = 8


def prefill_tokens(shapes: ModelShapes) -> int:
    return min(PREFILL_TOKENS, shapes.max_positions)


def token_counts(shapes: ModelShapes) -> list[int]:
    return sorted({1, prefill_tokens(shapes)})


def contexts(shapes: ModelShapes) -> list[tuple[int, str]]:
    """(kv length, label note): a few lengths up to the model's maximum, capped by CONTEXTS and memory."""
    by_memory = MAX_ELEMENTS // (shapes.heads * shapes.head_dim)
    lengths = sorted({min(length, shapes.max_positions, by_memory) for length in CONTEXTS})
    longest = lengths[-1]
    note = f" (capped: max_positions={shapes.max_positions})" if longest < shapes.max_positions else ""
    return [(length, note if length == longest else "") for length in lengths]


def capped_width(rows: int, inner: int, width: int) -> int:
    """The output width a [rows, inner] x [inner, width] reference can afford (a multiple of 64 when cut)."""
    fit = min(MAX_ELEMENTS // max(inner, 1), MAX_REFERENCE_FLOPS // max(2 * rows * inner, 1))
    if width <= fit:
        return width
    return max(64, fit // 64 * 64)


def _capped(full: int, used: int, what: str) -> str:
    return f" ({what} capped from {full} to {used}: float64 reference cost)" if used < full else ""


def linear_case(name: str, tokens: int, d_in: int, d_out: int) -> CaseSpec:
    used = capped_width(tokens, d_in, d_out)

    def make(g: torch.Generator) -> list:
        return [randn(g, tokens, d_in), randn(g, used, d_in, scale=1.0 / math.sqrt(d_in))]
    return CaseSpec(f"{MODEL}{name} [{tokens},{d_in}]x[{d_in},{used}]{_capped(d_out, used, 'width')}",
                    make, F.linear, accum=d_in)


def linear_cases(s: ModelShapes) -> list[CaseSpec]:
    projections = [("q_proj", s.hidden, s.heads * s.head_dim), ("kv_proj", s.hidden, s.kv_heads * s.head_dim),
                   ("o_proj", s.heads * s.head_dim, s.hidden)]
    if s.intermediate:
        projections += [("gate_up_proj", s.hidden, s.intermediate), ("down_proj", s.intermediate, s.hidden)]
    cases = [linear_case(f"{name} tokens={t}", t, d_in, d_out)
             for t in token_counts(s) for name, d_in, d_out in projections]
    rows = min(LOGIT_ROWS, s.max_positions)
    cases += [linear_case(f"lm_head vocab={s.vocab} tokens={t}", t, s.hidden, s.vocab) for t in sorted({1, rows})]
    return cases


def _norm_inputs(*shape: int):
    return lambda g: [randn(g, *shape, scale=2.0) + 0.5, uniform(g, shape[-1], low=0.5, high=1.5)]


def norm_cases(s: ModelShapes, fn) -> list[CaseSpec]:
    cases = [CaseSpec(f"{MODEL}hidden={s.hidden} [{t},{s.hidden}]", _norm_inputs(t, s.hidden), fn, accum=s.hidden)
             for t in token_counts(s)]
    t = prefill_tokens(s)
    cases.append(CaseSpec(f"{MODEL}per-head q/k norm head_dim={s.head_dim} [{t},{s.heads},{s.head_dim}]",
                          _norm_inputs(t, s.heads, s.head_dim), fn, accum=s.head_dim))
    return cases


def rotary_cases(s: ModelShapes) -> list[CaseSpec]:
    dim, heads, theta = s.rotary_dim or s.head_dim, s.heads, s.rope_theta

    def make(seq: int, start: int):
        def build(g: torch.Generator) -> list:
            cos, sin = rotary_tables(torch.arange(start, start + seq), dim, base=theta)
            return [randn(g, 1, heads, seq, dim), cos, sin]
        return build

    t = prefill_tokens(s)
    rot = f"rotary_dim={dim} theta={theta:g}"
    cases = [CaseSpec(f"{MODEL}prefill heads={heads} {rot} [1,{heads},{t},{dim}]", make(t, 0), apply_rotary,
                      accum=2)]
    for length, note in contexts(s):
        cases.append(CaseSpec(f"{MODEL}decode at position {length - 1}{note} heads={heads} {rot} "
                              f"[1,{heads},1,{dim}]", make(1, length - 1), apply_rotary, accum=2))
    return cases


def sdpa_cases(s: ModelShapes, backend: str) -> list[CaseSpec]:
    def case(label: str, q_len: int, kv_len: int, causal: bool) -> CaseSpec:
        def ref(q, k, v, mask=None):
            return attention_reference(q, k, v, mask, causal)
        return CaseSpec(label, _qkv(1, s.heads, s.kv_heads, q_len, kv_len, s.head_dim), _sdpa(backend, causal),
                        ref=ref, accum=kv_len)

    heads = f"heads q{s.heads}/kv{s.kv_heads} head_dim={s.head_dim}"
    p = min(ATTENTION_PREFILL, s.max_positions)
    cases = [case(f"{MODEL}causal prefill {heads} [1,{s.heads},{p},{s.head_dim}]", p, p, True)]
    for length, note in contexts(s):
        cases.append(case(f"{MODEL}decode kv={length}{note} {heads} [1,{s.heads},1,{s.head_dim}]", 1, length, False))
    return cases


def softmax_cases(s: ModelShapes) -> list[CaseSpec]:
    def case(label: str, shape: tuple[int, ...], scale: float) -> CaseSpec:
        return CaseSpec(label, lambda g: [randn(g, *shape, scale=scale)], lambda x: torch.softmax(x, dim=-1),
                        accum=shape[-1])

    p = min(ATTENTION_PREFILL, s.max_positions)
    cases = [case(f"{MODEL}attention probs heads={s.heads} [1,{s.heads},{p},{p}]", (1, s.heads, p, p), 3.0)]
    cases += [case(f"{MODEL}decode attention probs kv={length}{note} heads={s.heads} [1,{s.heads},1,{length}]",
                   (1, s.heads, 1, length), 3.0) for length, note in contexts(s)]
    rows = min(LOGIT_ROWS, s.max_positions)
    width = capped_width(1, rows, s.vocab)
    cases.append(case(f"{MODEL}vocab logits vocab={s.vocab} [{rows},{width}]{_capped(s.vocab, width, 'vocab')}",
                      (rows, width), 4.0))
    return cases


def embedding_cases(s: ModelShapes) -> list[CaseSpec]:
    hidden, rows, t = s.hidden, min(s.vocab, MAX_ELEMENTS // s.hidden), prefill_tokens(s)
    return [CaseSpec(f"{MODEL}ids [1,{t}] from vocab={s.vocab} [{rows},{hidden}]"
                     f"{_capped(s.vocab, rows, 'table rows')}",
                     lambda g: [randint(g, rows, 1, t), randn(g, rows, hidden)], F.embedding, judge="exact")]


def activation_cases(s: ModelShapes) -> tuple[str, list[CaseSpec]]:
    """(op name, cases) for the MLP activation at the intermediate width(s)."""
    gelu = s.activation.startswith("gelu")
    tanh = "tanh" in s.activation
    widths = sorted({w for w in (s.intermediate, s.expert_intermediate if s.is_moe else None) if w})

    def fn(x):
        if gelu:
            return F.gelu(x, approximate="tanh" if tanh else "none")
        return F.silu(x)
    cases = [CaseSpec(f"{MODEL}{s.activation} intermediate={w} [{t},{w}]",
                      lambda g, t=t, w=w: [randn(g, t, w, scale=3.0)], fn)
             for w in widths for t in token_counts(s)]
    return ("gelu" if gelu else "silu"), cases


def moe_cases(s: ModelShapes) -> dict[str, list[CaseSpec]]:
    assert s.experts and s.top_k
    e, k, h = s.experts, s.top_k, s.hidden
    inter = s.expert_intermediate or h
    renorm = "renormalised" if s.renormalize_topk else "not renormalised"
    tie_note = "" if e <= h else " (experts > hidden: random logits, near-ties possible)"
    out: dict[str, list[CaseSpec]] = {name: [] for name in ("moe_router", "moe_group_tokens", "index_add",
                                                              "scatter_add", "grouped_matmul")}
    for t in token_counts(s):
        shape = f"experts={e} top-{k} hidden={h} tokens={t}"
        out["moe_router"].append(router_case(f"{MODEL}{shape} {renorm}{tie_note}", t, h, e, k, s.renormalize_topk))
        out["moe_group_tokens"].append(group_case(f"{MODEL}{shape}", t, h, e, k))
        out["index_add"].append(combine_case(f"{MODEL}MoE combine {shape}", index_add, t, h, k))
        out["scatter_add"].append(combine_case(f"{MODEL}MoE combine {shape}", scatter_add, t, h, k))
        fit = max(1, min(e, MAX_ELEMENTS // (h * inter)))
        cut = f" (weights of {fit} of {e} experts: float64 reference memory)" if fit < e else ""
        for name, d_in, d_out in (("gate/up", h, inter), ("down", inter, h)):
            out["grouped_matmul"] += grouped_matmul_cases(f"{MODEL}{name} experts={e} tokens={t}{cut} ", t * k, fit,
                                                          d_in, d_out)
    return out


def window_cases(s: ModelShapes) -> list[CaseSpec]:
    assert s.sliding_window
    w = s.sliding_window
    by_memory = MAX_ELEMENTS // (s.heads * 16)
    kv = min(s.max_positions, 2 * w, by_memory, CONTEXTS[-1])
    p = min(ATTENTION_PREFILL, s.max_positions)
    note = "" if w < p else " (window >= length: causal only)"
    return [
        window_case(f"{MODEL}decode window={w} kv={kv} heads={s.heads} [1,{s.heads},1,{kv}]", s.heads, 1, kv, w),
        window_case(f"{MODEL}chunk of 16 queries window={w} kv={kv} heads={s.heads} [1,{s.heads},16,{kv}]",
                    s.heads, min(16, kv), kv, w),
        window_case(f"{MODEL}prefill window={w}{note} heads={s.heads} [1,{s.heads},{p},{p}]", s.heads, p, p, w),
    ]


def softcap_cases(s: ModelShapes) -> list[CaseSpec]:
    cases = []
    if s.attn_softcap:
        p = min(ATTENTION_PREFILL, s.max_positions)
        cases.append(softcap_case(f"{MODEL}attention scores cap={s.attn_softcap:g} heads={s.heads} "
                                  f"[1,{s.heads},{p},{p}]", (1, s.heads, p, p), s.attn_softcap, s.attn_softcap))
    if s.final_softcap:
        rows = min(LOGIT_ROWS, s.max_positions)
        width = capped_width(1, rows, s.vocab)
        cases.append(softcap_case(f"{MODEL}logits cap={s.final_softcap:g} vocab={s.vocab} [{rows},{width}]"
                                  f"{_capped(s.vocab, width, 'vocab')}", (rows, width), s.final_softcap,
                                  s.final_softcap))
    return cases


def model_cases(s: ModelShapes) -> dict[str, list[CaseSpec]]:
    """Op name -> the cases at this model's shapes (ops the catalog lacks here are skipped by the caller)."""
    def rms(x, w):
        return rms_norm_composite(x, w)

    def f_rms(x, w):
        return F.rms_norm(x, (x.shape[-1],), w, eps=1e-6)

    out: dict[str, list[CaseSpec]] = {
        "linear": linear_cases(s), "rms_norm": norm_cases(s, rms), "F.rms_norm": norm_cases(s, f_rms),
        "rotary": rotary_cases(s), "softmax": softmax_cases(s), "embedding": embedding_cases(s),
    }
    out.update({name: sdpa_cases(s, backend) for name, backend in SDPA_BACKENDS.items()})
    act_name, act_cases = activation_cases(s)
    out[act_name] = act_cases
    if s.is_moe:
        out.update(moe_cases(s))
    if s.sliding_window:
        out["sliding_window_mask"] = window_cases(s)
    if s.attn_softcap or s.final_softcap:
        out["tanh_softcap"] = softcap_cases(s)
    return {name: cases for name, cases in out.items() if cases}
