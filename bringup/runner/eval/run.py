"""One eval: the text's windows through the engine, the figures, the reference comparison, the saved reference."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from bringup import __version__
from bringup.errors import BringupError
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.eval.divergence import (
    PositionComparison,
    TopK,
    compare_full,
    compare_top_k,
    target_logprobs,
    top_k,
)
from bringup.runner.eval.identity import tokenizer_sha256, tokens_sha256
from bringup.runner.eval.metrics import NllSummary, ReferenceSummary, summarize_comparison, summarize_nll
from bringup.runner.eval.reference64 import reference_executor
from bringup.runner.eval.reference_file import DEFAULT_K, save_reference
from bringup.runner.eval.reference_header import SCHEMA, ReferenceHeader
from bringup.runner.eval.scoring import reserved_blocks, window_logprobs
from bringup.runner.eval.settings import EvalSettings, check_reference, reference_tokens
from bringup.runner.eval.text import EvalText
from bringup.runner.eval.windows import Window, plan_windows

FLOAT64 = "float64"
SLACK_TOKENS = 64  # tokens past --max-tokens the tokenized prefix must give
PREFIX_CHARS_PER_TOKEN = 16  # the first prefix's characters per token wanted (doubled until it gives them)


@dataclass(frozen=True)
class ReferenceSpec:
    """What to compare with: the float64 CPU model, or a file saved by --save-reference (header and rows)."""

    source: str  # "float64" or the file's path
    header: ReferenceHeader | None = None
    rows: TopK | None = None


@dataclass
class EvalResult:
    model: str
    dtype: str
    device: str
    settings: EvalSettings
    text_source: str
    text_sha256: str
    text_tokens: int
    windows: int
    nll: NllSummary
    seconds: float  # the run's windows alone: forwards, log-softmax and NLL, not the reference's work
    reference: ReferenceSummary | None = None
    saved_reference: str | None = None
    fallbacks: dict[str, int] = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.nll.tokens / self.seconds if self.seconds > 0 else 0.0


def leading_tokens(encode: Callable[[str], list[int]], text: str, count: int | None) -> list[int]:
    """The text's first `count` token ids (every one with None), tokenizing only as much of the text as they need:
    a prefix that gives SLACK_TOKENS more, so that the word the cut splits stays clear of them (a 100 MB line with
    --max-tokens 64 took 60 s and 1.3 GB, tokenized whole)."""
    if count is None:
        return encode(text)
    chars = PREFIX_CHARS_PER_TOKEN * (count + SLACK_TOKENS)
    while True:
        tokens = encode(text[:chars])
        if chars >= len(text) or len(tokens) >= count + SLACK_TOKENS:
            return tokens[:count]
        chars *= 2


def eval_tokens(engine: LLMEngine, text: EvalText, settings: EvalSettings,
                reference: ReferenceSpec | None) -> list[int]:
    """The text's token ids (no special tokens added), cut to --max-tokens or to the reference file's count;
    a reference from another text or tokenizer is refused here, before any window runs."""
    header = reference.header if reference is not None else None
    limit = settings.max_tokens if settings.max_tokens is not None else header.tokens if header else None
    tokens = leading_tokens(lambda part: engine.tokenizer.encode(part, add_special_tokens=False), text.text, limit)
    if header is None:
        return tokens[:settings.max_tokens] if settings.max_tokens is not None else tokens
    tokens = reference_tokens(tokens, settings.max_tokens, header)
    check_reference(header, text.sha256, tokens_sha256(tokens), engine.vocab_size, reference.source)
    return tokens


def run_eval(engine: LLMEngine, model_dir: Path | None, text: EvalText, tokens: list[int], settings: EvalSettings,
             reference: ReferenceSpec | None = None, save_to: Path | None = None, k: int = DEFAULT_K,
             on_window: Callable[[int, int], None] | None = None) -> EvalResult:
    """Score every window of `tokens` (from eval_tokens); `on_window(done, total)` after each."""
    windows = plan_windows(len(tokens), settings.ctx, settings.stride)
    compare = _comparer(engine, model_dir, reference, settings.ctx)
    nlls: list[torch.Tensor] = []
    comparisons: list[PositionComparison] = []
    saved: list[TopK] = []
    seconds = 0.0
    with reserved_blocks(engine, settings.ctx) as table:
        for done, window in enumerate(windows, 1):
            targets = torch.tensor(tokens[window.first_scored:window.end])
            start = time.perf_counter()
            logprobs = window_logprobs(engine.executor, tokens, window, table)
            nlls.append(-target_logprobs(logprobs, targets).cpu().double())
            seconds += time.perf_counter() - start
            check_finite(nlls[-1], window)
            if compare is not None:
                comparisons.append(compare(tokens, window, logprobs, targets))
            if save_to is not None:
                saved.append(top_k(logprobs, targets, k))
            if on_window is not None:
                on_window(done, len(windows))
    summary = summarize_nll(torch.cat(nlls))
    result = EvalResult(
        model=engine.model_name, dtype=engine.plan.dtype.value, device=engine.plan.device, settings=settings,
        text_source=text.source, text_sha256=text.sha256, text_tokens=len(tokens), windows=len(windows),
        nll=summary, seconds=seconds, fallbacks={level: int(n) for level, n in engine.fallbacks.counts.items()})
    if reference is not None:
        k_used = reference.header.k if reference.header is not None else None
        result.reference = summarize_comparison(comparisons, summary.ppl, reference.source, k_used)
    if save_to is not None:
        save_reference(save_to, _header(engine, text, settings, tokens, k), _concat(saved))
        result.saved_reference = str(save_to)
    return result


class NonFiniteScores(BringupError):
    """The model's numbers cannot be trusted: a finding about the device or the weights (exit 1), not bad input."""

    exit_code = 1


def check_finite(nlls: torch.Tensor, window: Window) -> None:
    bad = (~torch.isfinite(nlls)).nonzero().flatten()
    if bad.numel():
        position = window.first_scored + int(bad[0])
        raise NonFiniteScores(f"the model gave a non-finite log-probability to token {position} (window starting at "
                              f"token {window.start}); numbers that cannot be trusted are not recorded: check the "
                              "weights and dtype (try --dtype float32) and run `bringup verify-ops` on this device")


Comparer = Callable[[list[int], Window, torch.Tensor, torch.Tensor], PositionComparison]


def _comparer(engine: LLMEngine, model_dir: Path | None, reference: ReferenceSpec | None,
              ctx: int) -> Comparer | None:
    if reference is None:
        return None
    rows = reference.rows
    if rows is not None:
        def against_file(tokens: list[int], window: Window, logprobs: torch.Tensor,
                         targets: torch.Tensor) -> PositionComparison:
            scored = slice(window.first_scored - 1, window.end - 1)  # row i: the position predicting token i + 1
            return compare_top_k(logprobs, TopK(rows.ids[scored], rows.logprobs[scored],
                                                rows.target_logprobs[scored]))

        return against_file
    executor, table = reference_executor(engine, model_dir, ctx)

    def against_float64(tokens: list[int], window: Window, logprobs: torch.Tensor,
                        targets: torch.Tensor) -> PositionComparison:
        return compare_full(logprobs, window_logprobs(executor, tokens, window, table), targets)

    return against_float64


def _concat(parts: list[TopK]) -> TopK:
    return TopK(torch.cat([p.ids for p in parts]), torch.cat([p.logprobs for p in parts]),
                torch.cat([p.target_logprobs for p in parts]))


def _header(engine: LLMEngine, text: EvalText, settings: EvalSettings, tokens: list[int], k: int) -> ReferenceHeader:
    return ReferenceHeader(
        schema=SCHEMA, k=min(k, engine.vocab_size), ctx=settings.ctx, stride=settings.stride,
        text_sha256=text.sha256, tokens_sha256=tokens_sha256(tokens), tokens=len(tokens),
        tokenizer_sha256=tokenizer_sha256(engine.tokenizer), vocab_size=engine.vocab_size, model=engine.model_name,
        dtype=engine.plan.dtype.value, device=engine.plan.device,
        versions={"bringup": __version__, "torch": torch.__version__})
