"""Prefill attention when no profile verified an SDPA backend: each candidate checked here, on this device, before it
is planned.

Without a profile (or with one whose probe left SDPA unverified, as opposed to failed) the plan has only plain
matmul-softmax, which builds [heads, T, T] scores for a T-token prompt. At start-up each SDPA backend the profile
does not rule out is run on the model's head shapes (two ragged prompts, the runner's boolean mask, the plan dtype)
and compared with float64 attention on the CPU from the same inputs; it is accepted when its error is not materially
worse than the plain path's on the same inputs (PyTorch's accuracy-checker rule, DESIGN.md), then timed against the
plain path on one PROMPT_TOKENS-token prompt and planned first only when faster. Each candidate's verdict is in the
attention row; the plain path stays behind it as the op fallback. A tune record stores the numbers
(plan/attention_timings.py); a start that replays it runs the float64 check again (cheap) and takes the timings.
"""

from __future__ import annotations

import time
from dataclasses import replace

import torch

from bringup.errors import exception_line
from bringup.log import get_logger
from bringup.profiles.attention_kinds import PLAIN_ATTENTION, SDPA_BY_PREFERENCE
from bringup.runner.engine.best_of import best_of
from bringup.runner.model.attention import implementation
from bringup.runner.model.attention_layer import matmul_softmax_attention
from bringup.runner.model.config import ModelConfig
from bringup.runner.plan.attention_timings import (
    PROMPT_TOKENS,
    AttentionTimings,
    attention_verdicts,
    needs_timing,
)
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.plan import attention_limits
from bringup.runner.plan.profile_facts import ProfileFacts

log = get_logger("runner.attention_check")

CHECK_LENGTHS = (48, 37)  # two ragged prompts: a padded, causal, boolean mask as the runner builds it
REPEATS = 3
GIVEN = "given as data"


def _inputs(config: ModelConfig, lengths: tuple[int, ...], dtype: torch.dtype, device: torch.device):  # type: ignore[no-untyped-def]
    """q [kvH, B, G*Q, hd], k/v [kvH, B, L, hd], the mask [1, B, G*Q, L] and the valid query rows [B, G*Q]."""
    gen = torch.Generator().manual_seed(0)
    kv, group, hd = config.num_kv_heads, config.num_heads // config.num_kv_heads, config.head_dim
    B, L = len(lengths), max(lengths)
    q = torch.randn(kv, B, group * L, hd, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(kv, B, L, hd, generator=gen, dtype=torch.float64) for _ in range(2))
    pos = torch.arange(L)
    lens = torch.tensor(lengths)
    m = (pos.view(1, 1, L) <= pos.view(1, L, 1)) & (pos.view(1, 1, L) < lens.view(B, 1, 1))  # [B, Q, L]
    valid = (pos.view(1, L) < lens.view(B, 1)).repeat(1, group)  # [B, G*Q]
    mask = m.view(1, B, 1, L, L).expand(1, B, group, L, L).reshape(1, B, group * L, L)
    # padded query rows attend to key 0 so no row is empty (their output is dropped, as the runner drops it)
    mask = mask | ((~valid).view(1, B, group * L, 1) & (pos.view(1, 1, 1, L) == 0))
    on = [t.to(dtype).to(device) for t in (q, k, v)]  # cast on the host: a device may refuse float64
    return (q, k, v), on, mask.to(device), valid


def _error(out: torch.Tensor, ref: torch.Tensor, valid: torch.Tensor) -> float:
    rows = valid.view(1, *valid.shape)
    got, want = out.cpu().double()[rows.expand(out.shape[0], -1, -1)], ref[rows.expand(ref.shape[0], -1, -1)]
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float((got - want).abs().max() / want.abs().max())


def _seconds(fn, args) -> float:  # type: ignore[no-untyped-def]
    fn(*args)
    return best_of(lambda: fn(*args), args[0].device, REPEATS)


def measure_attention(config: ModelConfig, dtype: torch.dtype, device: torch.device, candidates: list[str],
                      recorded: AttentionTimings | None = None, max_model_len: int = PROMPT_TOKENS
                      ) -> tuple[AttentionTimings, bool]:
    """Each candidate's error against float64 (always run: a few milliseconds on two short prompts, and it guards
    correctness), then its time against the plain path's on a PROMPT_TOKENS-token prompt (or a `max_model_len` one:
    no prompt is longer, and the plain path's [heads, T, T] scores must fit a small device), in order until one wins;
    the times taken from `recorded` (a tune record's) when it holds every one the choice reads (then True)."""
    scale = config.head_dim ** -0.5
    (q64, k64, v64), inputs, mask, valid = _inputs(config, CHECK_LENGTHS, dtype, device)
    ref = matmul_softmax_attention(q64, k64, v64, mask.cpu(), scale)
    plain_err = _error(matmul_softmax_attention(*inputs, mask, scale), ref, valid)
    errors, cannot = {}, {}
    for name in candidates:
        try:
            errors[name] = _error(implementation(name)(*inputs, mask, scale), ref, valid)
        except Exception as exc:  # a backend this build or device cannot run: the next one
            cannot[name] = exception_line(exc)
    tokens = min(PROMPT_TOKENS, max_model_len)
    checked = AttentionTimings(plain_err, 0.0, errors, {}, cannot, tokens)
    if recorded is not None and recorded.tokens == tokens:  # else timed on another prompt: timed again
        replay = replace(checked, plain_s=recorded.plain_s, seconds=dict(recorded.seconds))
        if not needs_timing(replay, candidates):
            return replay, True
    _, timed, long_mask, _ = _inputs(config, (tokens,), dtype, device)
    plain_s = _seconds(matmul_softmax_attention, (*timed, long_mask, scale))
    seconds: dict[str, float] = {}
    for name in needs_timing(replace(checked, plain_s=plain_s), candidates):
        try:
            seconds[name] = _seconds(implementation(name), (*timed, long_mask, scale))
        except Exception as exc:
            cannot[name] = exception_line(exc)
            continue
        if seconds[name] < plain_s:
            break
    return AttentionTimings(plain_err, plain_s, errors, seconds, cannot, tokens), False


def ruled_out(facts: ProfileFacts, dtype: str, config: ModelConfig, max_model_len: int) -> set[str]:
    """The SDPA backends the profile records failing at `dtype`, or the model's math rules out."""
    failed = {name for name in SDPA_BY_PREFERENCE
              if facts.capability("attention", name, dtype)[0] == "unsupported" or facts.ops(dtype, {name}).failed}
    return failed | set(attention_limits(config, max_model_len))


def with_checked_attention(choice: Choice, config: ModelConfig, dtype: torch.dtype, device: torch.device,
                           ruled_out: set[str], recorded: AttentionTimings | None = None, record: str = "",
                           max_model_len: int = PROMPT_TOKENS) -> tuple[Choice, AttentionTimings | None]:
    """`choice` when it plans more than the plain path (and no timings); otherwise the plain path behind the first
    SDPA backend (not in `ruled_out`: the profile's failures, the model's limits) checked correct and faster here,
    and the numbers that chose it. `recorded`: a tune record's timings (`record` names it), replayed when they cover
    the choice (GIVEN: the start's measurements given as data)."""
    if choice.value != [PLAIN_ATTENTION]:
        return choice, None
    candidates = [name for name in SDPA_BY_PREFERENCE if name not in ruled_out]
    if not candidates:
        return choice, None
    log.warning("attention: no profile verified an SDPA backend; checking %s at start-up instead of planning "
                "plain matmul-softmax over [heads, T, T] scores", ", ".join(candidates))
    began = time.perf_counter()
    timings, replayed = measure_attention(config, dtype, device, candidates, recorded, max_model_len)
    how = (f"timings {'from tune record ' if record != GIVEN else ''}{record}, the float64 check run here" if replayed
           else f"checked and timed at start-up in {time.perf_counter() - began:.2f} s")
    chosen, notes = attention_verdicts(timings, candidates)
    if chosen is None:
        return Choice(choice.value, f"{choice.evidence}; start-up check ({how}): {'; '.join(notes)}"), timings
    return Choice([chosen, PLAIN_ATTENTION], f"{'; '.join(notes)} ({how}); {choice.evidence}"), timings
