"""The parity check the quantized engine tests share: the engine's greedy tokens with int8/int4/fp8 weights against
the module-level reference of the same quantized weights (int8/int4: activations quantized per block; weights
dequantized, then F.linear in float32) on the same model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.plan.plan import Choice
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.formats.integer import quantize_activations
from bringup.runner.weights.kinds import DEQUANT_KINDS, FP8, OUT_IN
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.stated import stated

GREEDY_TOKENS = 32
# The activations are rounded to int8 codes per block of 32, so a float32 difference of one ulp between the engine's
# and the reference's order of operations moves a value across a code boundary now and then: one code step on
# that product, a large one in a block whose largest value is an outlier. On SmolLM2-135M the logits of the same
# int8 model in float32 and in float64 differ by up to 0.1 of their RMS. Greedy paths may part where the reference's
# top two tokens are that close, and only there.
FLIP_MARGIN = 0.1  # of the reference's logit RMS at that step
ACTIVATIONS_QUANTIZED = tuple(DEQUANT_KINDS)  # int8 and the int4 kinds; fp8 is weight-only
REFERENCE_KIND = {**DEQUANT_KINDS, FP8: FP8}  # fp8's kind is its reference


def tiny_quantizable_model(tmp_path_factory, name: str, hidden: int = 64) -> Path:  # type: ignore[no-untyped-def]
    """A random-init two-layer Llama whose every linear input is a whole number of blocks of 32 (of `hidden`)."""
    path = tmp_path_factory.mktemp(name) / "m"
    make_hf_model(path, hidden=hidden, intermediate=2 * hidden, layers=2, vocab=320)
    return path


def start_quantized(model: Path, work: Path, quantization: str) -> LLMEngine:
    """The engine on `model` with `quantization`, its start-up measurements stated (no timing)."""
    return LLMEngine.create(EngineOptions(model_dir=model, device="cpu", profile_path=work / "p.yaml",
                                          max_model_len=128, max_num_seqs=1, measurements=stated(),
                                          quantization=quantization))


def reference_model(engine: LLMEngine, model_dir: Path | None, scheme: str) -> DecoderModel:
    """The engine's model loaded again with every linear layer applied as dequantize + F.linear (float32)."""
    kind = REFERENCE_KIND[scheme]
    return model_source(model_dir).load(engine.executor.model.config, torch.float32, torch.device("cpu"),
                                        WeightLayout(kind, kind, 0))


def dequantized_once(reference: DecoderModel, scheme: str) -> DecoderModel:
    """`reference` with its weights dequantized once and kept as F.linear's, each linear layer's input quantized per
    block first: the same products as the reference kind, without dequantizing every weight at every step."""
    reference.add_kind(OUT_IN, REFERENCE_KIND[scheme])
    reference.use_layout(WeightLayout(OUT_IN, OUT_IN, 0))
    for linear in reference.linear_layers() if scheme in ACTIVATIONS_QUANTIZED else []:
        linear.register_forward_pre_hook(lambda _, args: (quantize_activations(args[0]), *args[1:]))
    return reference


def assert_same_quantized_weights(engine: LLMEngine, reference: DecoderModel, scheme: str) -> None:
    served = engine.executor.model
    assert served.layout.kinds == [scheme]
    for ours, theirs in zip(served.linear_layers(), reference.linear_layers(), strict=True):
        assert torch.equal(ours.weight(scheme), theirs.weight(REFERENCE_KIND[scheme]))


def reference_greedy(engine: LLMEngine, reference: DecoderModel, prompt: list[int], steps: int
                     ) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy tokens of `reference`, one step at a time through an executor with plain attention, and each step's
    logits."""
    size = engine.plan.block_size
    blocks = -(-(len(prompt) + steps) // size)
    reference.allocate_kv_cache(blocks, size)
    plan = replace(engine.plan, attention=Choice(["matmul_softmax"], "reference"), compiled=Choice(None, "eager"))
    executor = Executor(reference, plan, FallbackRecorder())
    tokens, start, rows = list(prompt), 0, []
    for _ in range(steps):
        logits = executor.run_chunks([SeqChunk(tokens, start, list(range(blocks)))])
        start = len(tokens)
        tokens.append(int(logits[0].argmax()))
        rows.append(logits[0].double())
    return tokens[len(prompt):], rows


def assert_decode_matches_reference(engine: LLMEngine, model_dir: Path | None, scheme: str,
                                    prompt: list[int]) -> list[int]:
    """GREEDY_TOKENS greedy tokens of the engine identical to the reference's, or identical up to a step where the
    reference itself nearly tied between the two tokens (see FLIP_MARGIN); the tokens."""
    reference = reference_model(engine, model_dir, scheme)
    assert_same_quantized_weights(engine, reference, scheme)
    return assert_same_greedy(engine, dequantized_once(reference, scheme), prompt)


def assert_same_greedy(engine: LLMEngine, reference: DecoderModel, prompt: list[int]) -> list[int]:
    """The engine's GREEDY_TOKENS greedy tokens equal `reference`'s but where the reference nearly tied; the tokens."""
    want, logits = reference_greedy(engine, reference, prompt, GREEDY_TOKENS)
    params = SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0, ignore_eos=True)
    got = engine.generate([prompt], params)[0].token_ids
    first = next((i for i, (a, b) in enumerate(zip(got, want, strict=True)) if a != b), None)
    if first is not None:
        row = logits[first]
        margin = (row[want[first]] - row[got[first]]).item()
        scale = row.square().mean().sqrt().item()
        assert margin <= FLIP_MARGIN * scale, f"step {first}: the engine chose {got[first]}, the reference " \
            f"{want[first]} by a margin of {margin:.3g} logits (a near tie is at most {FLIP_MARGIN * scale:.3g})"
    return got
