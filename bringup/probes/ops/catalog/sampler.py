"""Catalog: the runner's own sampling path (runner/draws.py), judged against the distribution it was given.

Each case repeats a few rows of float32 logits (what every sampling step works on) DRAWS times, gives each repeat one
uniform from a seeded host generator (as the runner draws one from each request's generator) and runs the runner's
draw on the device. The judge is multinomial's: a chi-square test at alpha = 1e-6 of where the draws fell, against
the float64 distribution that those very logits, the temperature and the filters define (`expected_distribution`,
written from the filters' definitions, not from the runner's code), and a draw of a token the filters remove fails
outright.
"""

from __future__ import annotations

import torch

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, op
from bringup.runner.draws import RowParams, draw_rows, uses_nucleus

DRAWS = 16_000  # per distinct row (the case is DRAWS x ROWS x VOCAB floats: kept small, verify-ops runs it every time)
ROWS, VOCAB = 3, 64
UNIFORM_SEED = 20261206


def runner_draws(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float
                 ) -> torch.Tensor:
    """[ROWS, DRAWS] token ids drawn by the runner's sampler from each row of logits [ROWS, V]."""
    rows, vocab = logits.shape
    repeated = logits.float().repeat_interleave(DRAWS, dim=0)
    uniforms = torch.rand(repeated.shape[0], generator=torch.Generator().manual_seed(UNIFORM_SEED)).tolist()
    params = RowParams.of_rows([(temperature, top_k, top_p, min_p, u) for u in uniforms], vocab, logits.device)
    return draw_rows(repeated, params, nucleus=uses_nucleus(top_p)).view(rows, DRAWS)


def expected_distribution(logits: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float
                          ) -> torch.Tensor:
    """[ROWS, V] float64: softmax(logits / temperature) restricted, in this order, to the top_k largest logits, the
    smallest most-probable prefix whose mass reaches top_p, and the tokens of at least min_p x the largest
    probability; each restriction renormalises the one before."""
    x = logits.to(torch.float64)
    scaled = (x - x.amax(dim=-1, keepdim=True)) / temperature
    keep = torch.ones_like(scaled, dtype=torch.bool)
    if 0 < top_k < x.shape[-1]:
        keep &= scaled >= scaled.topk(top_k, dim=-1).values[:, -1:]
    if top_p < 1.0:
        probs = _softmax_over(scaled, keep)
        ordered, order = probs.sort(dim=-1, descending=True, stable=True)
        mass_before = ordered.cumsum(dim=-1) - ordered
        keep &= torch.zeros_like(keep).scatter(1, order, mass_before < top_p)
    if min_p > 0.0:
        probs = _softmax_over(scaled, keep)
        keep &= probs >= min_p * probs.amax(dim=-1, keepdim=True)
    return _softmax_over(scaled, keep)


def _softmax_over(scaled: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.softmax(scaled.masked_fill(~keep, float("-inf")), dim=-1)


def sampler_ops() -> list[OpSpec]:
    def case(temperature: float, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0, role: str = ""
             ) -> CaseSpec:
        settings = (temperature, top_k, top_p, min_p)
        return CaseSpec(lambda g: [randn(g, ROWS, VOCAB, scale=2.0)],
                        lambda logits: runner_draws(logits, *settings),
                        ref=lambda logits: expected_distribution(logits, *settings), shapes=((ROWS, VOCAB),),
                        role=role, params=(("temperature", temperature), ("top_k", top_k), ("top_p", top_p),
                                           ("min_p", min_p), ("draws", DRAWS)), judge="sampler")

    return [op("runner_sampler", "sampling", [
        case(0.7, role="vocabulary order"),
        case(1.0, top_k=12, min_p=0.05, role="vocabulary order, filters"),
        case(1.3, top_k=40, top_p=0.8, role="nucleus"),
        case(1.0, top_p=0.9, min_p=0.02, role="nucleus, min-p"),
    ], dtypes=("float32",), note="the runner's sampler (runner/draws.py) on float32 logits, judged by chi-square "
                                 "against the float64 distribution of those logits after temperature and filters")]
