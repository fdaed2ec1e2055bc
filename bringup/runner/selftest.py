"""End-to-end numerical self-test: the runner on its device vs the same model on CPU in float64."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from bringup.profiles.attention_kinds import PLAIN_ATTENTION
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.sequence import Sequence
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.plan.plan import Choice
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.kinds import DEQUANT_KINDS, QUANTIZED_KINDS
from bringup.runner.weights.layout_linear import WEIGHT_PREFIX

FIXED_PROMPT = "The quick brown fox jumps over the lazy dog. Bringing up a new accelerator, step by step:"

# max |logit error| allowed, as a multiple of the reference logits' RMS: a few units of the dtype's
# rounding (float32 2^-24, float16 2^-11, bfloat16 2^-8) amplified through the layers' accumulations.
THRESHOLDS = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 1.2e-1}
REFERENCE_KINDS = DEQUANT_KINDS
# int8 / int4 plans round activations to int8 codes per block of 32, on the device in float32 and in the reference in
# float64; a value one rounding apart on each side of a code boundary takes a whole code step (large in a block with
# an outlier), so the two drift further than the dtype's rounding: 0.12 of the logits' RMS on SmolLM2-135M over 16
# steps. The bound allows twice that; a wrong kernel (a scale off by 1.5, a block's minimum dropped) is far outside.
QUANTIZED_THRESHOLD = 0.25  # the module-level reference of each kernel's storage


@dataclass
class SelftestResult:
    passed: bool
    max_abs_err: float
    reference_rms: float
    threshold: float
    top1_agreement: float
    near_ties: int
    steps: int
    prompt_tokens: int
    seconds: float
    nonfinite: int = 0  # logits NaN/Inf on the device or in the reference (weights loaded with --force): a failure
    logits: int = 0  # how many were compared
    worst_step: int = 0  # the step (0: the prompt's prefill) whose logits hold max_abs_err
    worst_path: str = ""  # that step's forward: how many tokens it ran and the weight layout kind they used

    def error_reason(self) -> str | None:
        """Where the largest error came from, when it is over the threshold: which step, and the weight kind that
        step's forward used (a mixed layout serves the prefill and the decode steps through different products)."""
        if self.max_abs_err <= self.threshold:
            return None
        return (f"max abs err {self.max_abs_err:.3g} over the threshold {self.threshold:.3g} at step "
                f"{self.worst_step + 1} of {self.steps} ({self.worst_path})")

    def nonfinite_reason(self) -> str | None:
        if not self.nonfinite:
            return None
        return (f"{self.nonfinite} of {self.logits} logits are NaN/Inf on the device or in the float64 reference "
                "(the weights hold NaN/Inf, loaded with --force): the figures cover the finite ones")


def reference_model(engine: LLMEngine, model_dir: Path | None, allow_nonfinite: bool = False) -> DecoderModel:
    """The same weights on the CPU in float64, eager, plain attention. `model_dir` is what --model names: a model
    directory, a .gguf file, or None for the built-in model; `allow_nonfinite` (--force) loads NaN/Inf weights
    as the engine did."""
    config, cpu = engine.executor.model.config, torch.device("cpu")
    source = model_source(model_dir)
    source.check(config)
    source.check_weights(config, torch.float64, cpu, allow_nonfinite)
    return source.load(config, torch.float64, cpu, checked=True)


def same_quantized_weights(reference: DecoderModel, engine: LLMEngine) -> DecoderModel:
    """`reference` with each linear layer holding the engine's quantized weight and applying it as the scheme's
    module-level reference does (activations quantized per block, weight dequantized), in float64, when the plan
    quantizes: selftest then tests the device's arithmetic, not the quantization error (eval measures that)."""
    served = engine.executor.model
    kind = served.layout.small
    if kind not in QUANTIZED_KINDS:
        return reference
    reference_kind = REFERENCE_KINDS.get(kind, kind)
    for mine, theirs in zip(reference.linear_layers(), served.linear_layers(), strict=True):
        mine.register_buffer(WEIGHT_PREFIX + reference_kind, theirs.weight(kind))
    reference.use_layout(WeightLayout(reference_kind, reference_kind, 0))
    return reference


def run_selftest(engine: LLMEngine, model_dir: Path | None, steps: int, allow_nonfinite: bool = False
                 ) -> SelftestResult:
    """`allow_nonfinite` (--force): NaN/Inf weights are loaded on both sides, and logits they make NaN/Inf fail the
    run (the figures are those of the finite logits, so the profile records no NaN)."""
    start = time.perf_counter()
    prompt = engine.tokenizer.encode(FIXED_PROMPT)[: engine.max_model_len // 2]
    steps = min(steps, engine.max_model_len - len(prompt) - 1)
    ref = _reference_greedy(engine, model_dir, prompt, steps, allow_nonfinite)  # [steps, vocab] float64, tokens
    tokens, ref_logits = ref
    dev_logits = _device_teacher_forced(engine, tokens, len(prompt), steps)
    finite = torch.isfinite(dev_logits) & torch.isfinite(ref_logits)
    nonfinite = int((~finite).sum())
    errors = torch.where(finite, (dev_logits - ref_logits).abs(), 0.0)
    err = errors[finite].max().item() if finite.any() else 0.0
    worst = int(errors.amax(-1).argmax()) if finite.any() else 0
    rms = ref_logits[finite].pow(2).mean().sqrt().item() if finite.any() else 0.0
    quantized = engine.executor.model.layout.small in QUANTIZED_KINDS
    threshold = (QUANTIZED_THRESHOLD if quantized else THRESHOLDS.get(engine.plan.dtype.value, 1e-1)) * max(rms, 1.0)
    dev_top, ref_top = dev_logits.argmax(-1), ref_logits.argmax(-1)
    agree = (dev_top == ref_top)
    gap = ref_logits.max(-1).values - ref_logits.gather(-1, dev_top.unsqueeze(-1)).squeeze(-1)
    near_ties = int((~agree & (gap <= threshold)).sum())
    real_disagreements = int((~agree).sum()) - near_ties
    return SelftestResult(
        passed=err <= threshold and real_disagreements == 0 and not nonfinite, max_abs_err=err, reference_rms=rms,
        threshold=threshold, top1_agreement=float(agree.double().mean()), near_ties=near_ties, steps=steps,
        prompt_tokens=len(prompt), seconds=time.perf_counter() - start, nonfinite=nonfinite,
        logits=finite.numel(), worst_step=worst, worst_path=step_path(engine, len(prompt), worst))


def step_path(engine: LLMEngine, n_prompt: int, step: int) -> str:
    """What _device_teacher_forced's `step` ran: the prompt's prefill or one decode token, and the weight kind the
    model's layout gives a forward of that many tokens (the head's one-row product may use the small kind)."""
    tokens = n_prompt if step == 0 else 1
    kind = engine.executor.model.layout.for_tokens(tokens)
    what = f"the prefill of {tokens} tokens" if step == 0 else "a one-token decode step"
    return f"{what}, {kind} weights"


def _reference_greedy(engine: LLMEngine, model_dir: Path | None, prompt: list[int], steps: int,
                      allow_nonfinite: bool) -> tuple[list[int], torch.Tensor]:
    """Greedy tokens and per-step logits of the float64 CPU model."""
    model = same_quantized_weights(reference_model(engine, model_dir, allow_nonfinite), engine)
    size = engine.plan.block_size
    blocks = -(-(len(prompt) + steps) // size)
    model.allocate_kv_cache(blocks, size)
    plan = reference_plan(engine)
    executor = Executor(model, plan, engine.fallbacks)
    tokens, rows = list(prompt), []
    table = list(range(blocks))
    start = 0
    for _ in range(steps):
        logits = executor.run_chunks([SeqChunk(tokens, start, table)]).cpu()
        rows.append(logits[0].double())
        start = len(tokens)
        tokens.append(int(logits[0].argmax()))
    return tokens, torch.stack(rows)


def reference_plan(engine: LLMEngine):  # type: ignore[no-untyped-def]
    from dataclasses import replace

    return replace(engine.plan, device="cpu", dtype=Choice("float64", "reference"),
                   attention=Choice([PLAIN_ATTENTION], "reference"), compiled=Choice(None, "reference"))


def _device_teacher_forced(engine: LLMEngine, tokens: list[int], n_prompt: int, steps: int) -> torch.Tensor:
    """The runner's logits for each step, fed the reference tokens: prefill, then paged decode steps."""
    seq = Sequence("selftest", list(tokens), n_prompt, params=None, arrival=-1)  # type: ignore[arg-type]
    engine.blocks.grow(seq, len(tokens))
    try:
        rows, start = [], 0
        for k in range(steps):
            end = n_prompt + k
            logits = engine.executor.run_chunks([SeqChunk(tokens[:end], start, seq.block_table)]).cpu()
            rows.append(logits[0].double())
            start = end
        return torch.stack(rows)
    finally:
        engine.blocks.free(seq)
