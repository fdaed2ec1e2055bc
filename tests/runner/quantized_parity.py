"""The parity check the quantized engine tests share: the engine's greedy tokens with int8/int4/fp8 weights against
the module-level reference of the same quantized weights (dequantize, then F.linear in float32) on the same model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.executor import Executor
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.linear_kinds import FP8, INT4, INT4_DEQUANT, INT8, INT8_DEQUANT, OUT_IN
from bringup.runner.model.source import model_source
from bringup.runner.plan.plan import Choice
from bringup.runner.sampling_params import SamplingParams

GREEDY_TOKENS = 32
REFERENCE_KIND = {INT8: INT8_DEQUANT, INT4: INT4_DEQUANT, FP8: FP8}  # fp8's kind is its reference


def reference_model(engine: LLMEngine, model_dir: Path | None, scheme: str) -> DecoderModel:
    """The engine's model loaded again with every linear layer applied as dequantize + F.linear (float32)."""
    kind = REFERENCE_KIND[scheme]
    return model_source(model_dir).load(engine.executor.model.config, torch.float32, torch.device("cpu"),
                                        WeightLayout(kind, kind, 0))


def dequantized_once(reference: DecoderModel, scheme: str) -> DecoderModel:
    """`reference` with its weights dequantized once and kept as F.linear's: the same products as dequantizing
    them at every call (the reference kind), without redoing it every step."""
    reference.add_kind(OUT_IN, REFERENCE_KIND[scheme])
    reference.use_layout(WeightLayout(OUT_IN, OUT_IN, 0))
    return reference


def assert_same_quantized_weights(engine: LLMEngine, reference: DecoderModel, scheme: str) -> None:
    served = engine.executor.model
    assert served.layout.kinds == [scheme]
    for ours, theirs in zip(served.linear_layers(), reference.linear_layers(), strict=True):
        assert torch.equal(ours.weight(scheme), theirs.weight(REFERENCE_KIND[scheme]))


def reference_greedy(engine: LLMEngine, reference: DecoderModel, prompt: list[int], steps: int) -> list[int]:
    """Greedy tokens of `reference`, one step at a time through an executor with plain attention."""
    size = engine.plan.block_size
    blocks = -(-(len(prompt) + steps) // size)
    reference.allocate_kv_cache(blocks, size)
    plan = replace(engine.plan, attention=Choice(["matmul_softmax"], "reference"), compiled=Choice(None, "eager"))
    executor = Executor(reference, plan, FallbackRecorder())
    tokens, start = list(prompt), 0
    for _ in range(steps):
        logits = executor.run_chunks([SeqChunk(tokens, start, list(range(blocks)))])
        start = len(tokens)
        tokens.append(int(logits[0].argmax()))
    return tokens[len(prompt):]


def assert_decode_matches_reference(engine: LLMEngine, model_dir: Path | None, scheme: str,
                                    prompt: list[int]) -> list[int]:
    """GREEDY_TOKENS greedy tokens of the engine identical to the reference's; the tokens."""
    reference = reference_model(engine, model_dir, scheme)
    assert_same_quantized_weights(engine, reference, scheme)
    want = reference_greedy(engine, dequantized_once(reference, scheme), prompt, GREEDY_TOKENS)
    params = SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0, ignore_eos=True)
    got = engine.generate([prompt], params)[0].token_ids
    assert got == want
    return got
