"""The parity check every family shares: bringup's float32 logits over a prompt and its greedy tokens against
transformers' on the same saved model."""

from __future__ import annotations

import torch

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.sampling_params import SamplingParams

MAX_LOGIT_ERROR = 1e-4
GREEDY_TOKENS = 32


def assert_matches_transformers(engine: LLMEngine, hf: torch.nn.Module, prompt: list[int]) -> torch.Tensor:
    """Logits over `prompt` within MAX_LOGIT_ERROR and GREEDY_TOKENS greedy tokens identical; transformers'
    logits, for further checks."""
    with torch.no_grad():
        ref_logits = hf(torch.tensor([prompt])).logits[0]
        ref_tokens = hf.generate(torch.tensor([prompt]), max_new_tokens=GREEDY_TOKENS, do_sample=False,
                                 pad_token_id=0)[0, len(prompt):].tolist()
    ours = engine.executor.run_chunks([SeqChunk(prompt, 0, [0, 1, 2])], all_positions=True).cpu()
    err = (ours - ref_logits).abs().max().item()
    assert err <= MAX_LOGIT_ERROR, f"max abs logits error {err}"
    out = engine.generate([prompt], SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0, ignore_eos=True))[0]
    assert out.token_ids == ref_tokens
    return ref_logits
