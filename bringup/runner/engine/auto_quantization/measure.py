"""`--quantization auto` on the served model: each candidate scheme (its kernel checked out here) measured against
the unquantized weights on the model itself, and kept only with the evidence quantize/scheme.py asks for.

Both sides run through the executor on the same KV cache before any request arrives: the next-token distributions
over the first CHECK_TOKENS tokens of the text `bringup eval` scores by default (read as package data: the engine
sits below runner/eval and imports none of it), KL(unquantized || quantized) per position as llama-perplexity's
--kl-divergence takes it, mean over positions; and real decode steps timed in turn (decode_timing.py's alternation,
batch 1).
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from typing import Any

import torch

from bringup.backends.host import is_host
from bringup.profiles.schema import Profile
from bringup.runner.engine.decode_timing import DecodeSteps, alternated, sweep_context
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.confirm import kept
from bringup.runner.plan.plan import MARGIN, Choice, ExecutionPlan
from bringup.runner.plan.quantize.device_scheme import device_candidates, device_description, device_origins
from bringup.runner.plan.quantize.held_blocks import auto_candidates_for, origins
from bringup.runner.plan.quantize.scheme import DESCRIPTION, KLD_BUDGET, NONE, auto_candidates, checked_note
from bringup.runner.weights.held import FLOAT_CHECKPOINT, LinearWeightTypes
from bringup.runner.weights.kinds import CONVERTIBLE

CHECK_TOKENS = 128
CHECK_TEXT = ("bringup.runner.eval", "default_text.md")  # the eval's built-in text, shipped with the package


def check_tokens(tokenizer: Any, executor: Executor) -> list[int]:
    package, name = CHECK_TEXT
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    tokens = tokenizer.encode(text, add_special_tokens=False)
    room = executor.plan.kv_blocks.value * executor.plan.block_size
    return tokens[: min(CHECK_TOKENS, executor.plan.max_model_len.value, room)]


def next_token_logprobs(executor: Executor, tokens: list[int]) -> torch.Tensor:
    """log-softmax of the logits after every token, one prefill from an empty cache (blocks 0 onward)."""
    blocks = list(range(-(-len(tokens) // executor.plan.block_size)))
    logits = executor.run_chunks([SeqChunk(tokens, 0, blocks)], all_positions=True)
    return torch.log_softmax(logits.float(), dim=-1)


def kl_divergence(reference: torch.Tensor, run: torch.Tensor) -> float:
    """Mean over positions of KL(reference || run), both log-probabilities [positions, vocab], in float64."""
    ref, ours = reference.cpu().double(), run.cpu().double()  # float64 on the host: a device may refuse it
    return float((ref.exp() * (ref - ours)).sum(dim=-1).clamp_min(0.0).mean())


def choose_auto(executor: Executor, tokenizer: Any, candidates: list[str], notes: list[str], source: str,
                origins: dict[str, str] | None = None, kinds: dict[str, str] | None = None) -> Choice:
    """Time and compare each candidate on the model (its weights converted from those stored for `source`, unless
    already stored: a file's blocks); leave the model serving the chosen one, or its own weights. `origins` says how
    a candidate's weights were made, where the checkpoint held quantized blocks; `kinds` the kind serving each
    scheme where it is not the scheme's own (an accelerator's kernel)."""
    model, kinds = executor.model, kinds or {}
    plain = model.layout
    tokens = check_tokens(tokenizer, executor)
    if len(tokens) < 2:
        return Choice(NONE, "; ".join([*notes, "no check text fits the KV cache: not measured"]))
    reference = next_token_logprobs(executor, tokens)
    step = DecodeSteps(executor, sweep_context(executor.plan))
    passed: dict[str, float] = {}
    for scheme in candidates:
        kind = kinds.get(scheme, scheme)
        model.add_kind(kind, source)
        quantized = WeightLayout(kind, kind, 0)
        model.layout = quantized
        kld = kl_divergence(reference, next_token_logprobs(executor, tokens))
        seconds, plain_s = alternated(step, lambda on, q=quantized: setattr(model, "layout", q if on else plain))
        model.layout = plain
        faster, close = kept(seconds, plain_s), kld <= KLD_BUDGET
        notes.append(f"{scheme}: KLD {kld:.4f} nats/token over {len(tokens)} tokens (budget {KLD_BUDGET}), decode "
                     f"step {seconds * 1e3:.2f} ms vs {plain_s * 1e3:.2f} ms unquantized"
                     + ("" if faster else f" (not under {MARGIN:.0%})") + ("" if close else " (over budget)"))
        if faster and close:
            passed[scheme] = seconds
    if not passed:
        model.use_layout(plain)
        return Choice(NONE, "auto: no scheme had every piece of evidence; " + "; ".join(notes))
    best = min(passed, key=passed.__getitem__)
    kind = kinds.get(best, best)
    model.use_layout(WeightLayout(kind, kind, 0))
    origin = (origins or {}).get(best)
    described = DESCRIPTION[best] if kind == best else device_description(kind)
    return Choice(best, f"auto: {described}, {origin + ', ' if origin else ''}{checked_note(best)}; "
                  + "; ".join(notes))


def auto_quantization(executor: Executor, tokenizer: Any, plan: ExecutionPlan,
                      weights: LinearWeightTypes = FLOAT_CHECKPOINT, profile: Profile | None = None) -> ExecutionPlan:
    """The plan with its quantization (and, when one is kept, weight layout) rows decided by `choose_auto`; on a
    checkpoint of quantized blocks (`weights`) no scheme that would round them again is a candidate; off the host,
    the schemes whose kernel `profile` verified there (device_scheme.py)."""
    model = executor.model
    if is_host(model.device):
        candidates, notes = auto_candidates(model.device, model.config)
        kinds = {}
    else:
        candidates, notes, kinds = device_candidates(model.device, model.config, profile, model.dtype)
    candidates = auto_candidates_for(candidates, notes, weights)
    source = next((kind for kind in model.layout.kinds if kind in CONVERTIBLE), None)
    if candidates and source is None:
        notes.append(f"the {model.layout.describe()} weights cannot be converted for quantizing")
        candidates = []
    if not candidates:
        return replace(plan, quantization=Choice(NONE, "auto: no candidate; " + "; ".join(notes)))
    made = origins(candidates, weights) if not kinds else device_origins(candidates, kinds, weights)
    choice = choose_auto(executor, tokenizer, candidates, notes, source, made, kinds)
    if choice.value == NONE:
        return replace(plan, quantization=choice)
    layout = Choice(kinds.get(choice.value, choice.value), "the auto-chosen quantization scheme's storage (see "
                                                           "quantization)")
    return replace(plan, quantization=choice, weight_layout=layout)
