"""Catalog cases at one model's own shapes (`verify-ops --model DIR`): extra cases of the existing ops,
labelled "model: ..." and derived from the shapes like any other case, so their records read alike.

The float64 CPU reference bounds what is sane to run: a tensor holds at most MAX_ELEMENTS elements and a
matmul costs at most MAX_REFERENCE_FLOPS; a dimension cut to fit says so in a param ("... capped from=N").
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog.attention import rotary_case, sdpa_case
from bringup.probes.ops.catalog.moe import (
    combine_case,
    group_case,
    grouped_matmul_cases,
    index_add,
    router_case,
    scatter_add,
)
from bringup.probes.ops.catalog.quantized import (
    INT4_OPS,
    int4pack_case,
    int8pack_case,
    int_mm_case,
    largest_group,
    scaled_mm_case,
)
from bringup.probes.ops.catalog.reduce import rms_norm_composite
from bringup.probes.ops.catalog.window import softcap_case, window_case
from bringup.probes.ops.inputs import randint, randn, uniform
from bringup.probes.ops.model_shapes import ModelShapes
from bringup.probes.ops.spec import MODEL_CASE_PREFIX as MODEL
from bringup.probes.ops.spec import CaseSpec, Param
from bringup.profiles.attention_kinds import SDPA_BACKENDS

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


def contexts(shapes: ModelShapes) -> list[tuple[int, tuple[Param, ...]]]:
    """(kv length, params): a few lengths up to the model's maximum, capped by CONTEXTS and memory; the longest,
    when it falls short of the model's maximum, says so."""
    by_memory = MAX_ELEMENTS // (shapes.heads * shapes.head_dim)
    lengths = sorted({min(length, shapes.max_positions, by_memory) for length in CONTEXTS})
    longest = lengths[-1]
    note: tuple[Param, ...] = (("capped below max_positions", shapes.max_positions),) \
        if longest < shapes.max_positions else ()
    return [(length, note if length == longest else ()) for length in lengths]


def capped_width(rows: int, inner: int, width: int) -> int:
    """The output width a [rows, inner] x [inner, width] reference can afford (a multiple of 64 when cut)."""
    fit = min(MAX_ELEMENTS // max(inner, 1), MAX_REFERENCE_FLOPS // max(2 * rows * inner, 1))
    if width <= fit:
        return width
    return max(64, fit // 64 * 64)


def _capped(full: int, used: int, what: str) -> tuple[Param, ...]:
    """A param naming a dimension cut for the float64 reference's cost."""
    return ((f"{what} capped from", full),) if used < full else ()


def linear_case(name: str, tokens: int, d_in: int, d_out: int, params: tuple[Param, ...] = ()) -> CaseSpec:
    used = capped_width(tokens, d_in, d_out)

    def make(g: torch.Generator) -> list:
        return [randn(g, tokens, d_in), randn(g, used, d_in, scale=1.0 / math.sqrt(d_in))]
    return CaseSpec(make, F.linear, shapes=((tokens, d_in), (used, d_in)), role=f"{MODEL}{name}",
                    params=(*params, *_capped(d_out, used, "width")), accum=d_in, variant=_weight(name))


def _weight(name: str) -> tuple[Param, ...]:
    """The model weight a case stands for: q_proj and o_proj of a square attention share shapes and params."""
    return (("weight", name),)


def projections(s: ModelShapes) -> list[tuple[str, int, int]]:
    """(name, in features, out features) of a decoder layer's linear layers."""
    found = [("q_proj", s.hidden, s.heads * s.head_dim), ("kv_proj", s.hidden, s.kv_heads * s.head_dim),
             ("o_proj", s.heads * s.head_dim, s.hidden)]
    if s.intermediate:
        found += [("gate_up_proj", s.hidden, s.intermediate), ("down_proj", s.intermediate, s.hidden)]
    return found


def linear_cases(s: ModelShapes) -> list[CaseSpec]:
    cases = [linear_case(name, t, d_in, d_out) for t in token_counts(s) for name, d_in, d_out in projections(s)]
    rows = min(LOGIT_ROWS, s.max_positions)
    cases += [linear_case("lm_head", t, s.hidden, s.vocab, (("vocab", s.vocab),)) for t in sorted({1, rows})]
    return cases


def quantized_cases(s: ModelShapes) -> dict[str, list[CaseSpec]]:
    """The quantized kernels at every projection and the lm_head, decode (1 token) and prefill; int4 with the
    largest group size (of 32/64/128) that divides the projection's input width."""
    out: dict[str, list[CaseSpec]] = {name: [] for name in ("_weight_int8pack_mm", *INT4_OPS, "_int_mm",
                                                              "_scaled_mm")}
    rows = min(LOGIT_ROWS, s.max_positions)
    layers = [(name, t, d_in, d_out, ()) for t in token_counts(s) for name, d_in, d_out in projections(s)]
    layers += [("lm_head", t, s.hidden, s.vocab, (("vocab", s.vocab),)) for t in sorted({1, rows})]
    for name, t, d_in, d_out, params in layers:
        n = capped_width(t, d_in, d_out)
        params = (*params, *_capped(d_out, n, "width"))
        role, weight = f"{MODEL}{name}", _weight(name)
        out["_weight_int8pack_mm"].append(replace(int8pack_case(role, t, d_in, n, params), variant=weight))
        out["_int_mm"].append(replace(int_mm_case(t, d_in, n, b_transposed=True, role=role, params=params),
                                      variant=weight))
        out["_scaled_mm"].append(replace(scaled_mm_case(t, d_in, n, role=role, params=params), variant=weight))
        group = largest_group(d_in)
        if group is not None and n % 16 == 0:
            for op_name in INT4_OPS:
                out[op_name].append(replace(int4pack_case(op_name, role, t, d_in, n, group, params), variant=weight))
    return out


def _norm_inputs(*shape: int):
    return lambda g: [randn(g, *shape, scale=2.0) + 0.5, uniform(g, shape[-1], low=0.5, high=1.5)]


def norm_cases(s: ModelShapes, fn) -> list[CaseSpec]:
    def case(role: str, shape: tuple[int, ...]) -> CaseSpec:
        return CaseSpec(_norm_inputs(*shape), fn, shapes=(shape,), role=f"{MODEL}{role}", accum=shape[-1])
    t = prefill_tokens(s)
    return [*(case("hidden", (tokens, s.hidden)) for tokens in token_counts(s)),
            case("per-head q/k norm", (t, s.heads, s.head_dim))]


def rotary_cases(s: ModelShapes) -> list[CaseSpec]:
    dim, heads, theta = s.rotary_dim or s.head_dim, s.heads, s.rope_theta
    t = prefill_tokens(s)
    cases = [rotary_case((1, heads, t, dim), f"{MODEL}prefill", base=theta, params=(("theta", theta),))]
    for length, note in contexts(s):
        cases.append(rotary_case((1, heads, 1, dim), f"{MODEL}decode", start=length - 1, base=theta,
                                 params=(("theta", theta), *note)))
    return cases


def sdpa_cases(s: ModelShapes, backend: str) -> list[CaseSpec]:
    p = min(ATTENTION_PREFILL, s.max_positions)
    cases = [sdpa_case(backend, 1, s.heads, s.kv_heads, p, p, s.head_dim, f"{MODEL}prefill", causal=True)]
    for length, note in contexts(s):
        case = sdpa_case(backend, 1, s.heads, s.kv_heads, 1, length, s.head_dim, f"{MODEL}decode")
        cases.append(replace(case, params=(*case.params, *note)))
    return cases


def softmax_cases(s: ModelShapes) -> list[CaseSpec]:
    def case(role: str, shape: tuple[int, ...], scale: float, params: tuple[Param, ...] = ()) -> CaseSpec:
        return CaseSpec(lambda g: [randn(g, *shape, scale=scale)], lambda x: torch.softmax(x, dim=-1),
                        shapes=(shape,), role=f"{MODEL}{role}", params=params, accum=shape[-1])

    p = min(ATTENTION_PREFILL, s.max_positions)
    cases = [case("attention probs", (1, s.heads, p, p), 3.0)]
    cases += [case("decode attention probs", (1, s.heads, 1, length), 3.0, note) for length, note in contexts(s)]
    rows = min(LOGIT_ROWS, s.max_positions)
    width = capped_width(1, rows, s.vocab)
    cases.append(case("vocab logits", (rows, width), 4.0, (("vocab", s.vocab), *_capped(s.vocab, width, "vocab"))))
    return cases


def embedding_cases(s: ModelShapes) -> list[CaseSpec]:
    hidden, rows, t = s.hidden, min(s.vocab, MAX_ELEMENTS // s.hidden), prefill_tokens(s)
    return [CaseSpec(lambda g: [randint(g, rows, 1, t), randn(g, rows, hidden)], F.embedding,
                     shapes=((1, t), (rows, hidden)), role=f"{MODEL}ids",
                     params=(("vocab", s.vocab), *_capped(s.vocab, rows, "table rows")), judge="exact")]


def activation_cases(s: ModelShapes) -> tuple[str, list[CaseSpec]]:
    """(op name, cases) for the MLP activation at the intermediate width(s)."""
    gelu = s.activation.startswith("gelu")
    tanh = "tanh" in s.activation
    widths = sorted({w for w in (s.intermediate, s.expert_intermediate if s.is_moe else None) if w})

    def fn(x):
        if gelu:
            return F.gelu(x, approximate="tanh" if tanh else "none")
        return F.silu(x)
    cases = [CaseSpec(lambda g, t=t, w=w: [randn(g, t, w, scale=3.0)], fn, shapes=((t, w),),
                      role=f"{MODEL}{s.activation}", params=(("intermediate", w),))
             for w in widths for t in token_counts(s)]
    return ("gelu" if gelu else "silu"), cases


def moe_cases(s: ModelShapes) -> dict[str, list[CaseSpec]]:
    assert s.experts and s.top_k
    e, k, h = s.experts, s.top_k, s.hidden
    inter = s.expert_intermediate or h
    ties: tuple[Param, ...] = () if e <= h else (("near-ties possible", "experts > hidden"),)
    out: dict[str, list[CaseSpec]] = {name: [] for name in ("moe_router", "moe_group_tokens", "index_add",
                                                              "scatter_add", "grouped_matmul")}
    for t in token_counts(s):
        tokens: tuple[Param, ...] = (("tokens", t),)
        out["moe_router"].append(router_case(t, h, e, k, s.renormalize_topk, MODEL.strip(), (*tokens, *ties)))
        out["moe_group_tokens"].append(group_case(t, h, e, k, role=MODEL.strip(), params=tokens))
        out["index_add"].append(combine_case(index_add, t, h, k, role=f"{MODEL}MoE combine", params=tokens))
        out["scatter_add"].append(combine_case(scatter_add, t, h, k, role=f"{MODEL}MoE combine", params=tokens))
        fit = max(1, min(e, MAX_ELEMENTS // (h * inter)))
        cut: tuple[Param, ...] = (("experts capped from", e),) if fit < e else ()
        for name, d_in, d_out in (("gate/up", h, inter), ("down", inter, h)):
            out["grouped_matmul"] += grouped_matmul_cases(f"{MODEL}{name}", t * k, fit, d_in, d_out,
                                                          (*tokens, *cut))
    return out


def window_cases(s: ModelShapes) -> list[CaseSpec]:
    assert s.sliding_window
    w = s.sliding_window
    by_memory = MAX_ELEMENTS // (s.heads * 16)
    kv = min(s.max_positions, 2 * w, by_memory, CONTEXTS[-1])
    p = min(ATTENTION_PREFILL, s.max_positions)
    return [
        window_case(s.heads, 1, kv, w, f"{MODEL}decode"),
        window_case(s.heads, min(16, kv), kv, w, f"{MODEL}chunk of queries"),
        window_case(s.heads, p, p, w, f"{MODEL}prefill" + (" (window >= length: causal only)" if w >= p else "")),
    ]


def softcap_cases(s: ModelShapes) -> list[CaseSpec]:
    cases = []
    if s.attn_softcap:
        p = min(ATTENTION_PREFILL, s.max_positions)
        cases.append(softcap_case((1, s.heads, p, p), s.attn_softcap, s.attn_softcap, f"{MODEL}attention scores"))
    if s.final_softcap:
        rows = min(LOGIT_ROWS, s.max_positions)
        width = capped_width(1, rows, s.vocab)
        cases.append(softcap_case((rows, width), s.final_softcap, s.final_softcap, f"{MODEL}logits",
                                  (("vocab", s.vocab), *_capped(s.vocab, width, "vocab"))))
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
    out.update(quantized_cases(s))
    act_name, act_cases = activation_cases(s)
    out[act_name] = act_cases
    if s.is_moe:
        out.update(moe_cases(s))
    if s.sliding_window:
        out["sliding_window_mask"] = window_cases(s)
    if s.attn_softcap or s.final_softcap:
        out["tanh_softcap"] = softcap_cases(s)
    return {name: cases for name, cases in out.items() if cases}
