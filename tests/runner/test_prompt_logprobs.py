"""The engine's prompt logprobs (vLLM's `prompt_logprobs`): the numbers of the prompt's own prefill, once per
request (a preempted sequence is not scored again), only for the sequences that ask, and scoring requests
(max_tokens 0) that generate nothing. The comparison with transformers is in tests/server/test_prompt_logprobs.py.
"""

from __future__ import annotations

import re

import pytest
import torch

from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.outputs import RequestOutput
from bringup.runner.engine.scheduler import Scheduler
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.sampling_params import SamplingParams

GEN = torch.Generator().manual_seed(5)
PROMPTS = [torch.randint(3, 250, (n,), generator=GEN).tolist() for n in (37, 9, 20)]


def run_all(engine: LLMEngine, requests: dict[str, tuple[list[int], SamplingParams]]) -> list[RequestOutput]:
    """Every output of every step until the requests finish."""
    for request_id, (prompt, params) in requests.items():
        engine.add_request(request_id, prompt, params)
    outputs: list[RequestOutput] = []
    while engine.has_unfinished():
        outputs += engine.step()
    return outputs


def reference(engine: LLMEngine, prompt: list[int]) -> torch.Tensor:
    """log_softmax of the prompt's logits at every position, from one all-position prefill of the executor."""
    blocks = list(range(-(-len(prompt) // engine.plan.block_size)))
    logits = engine.executor.run_chunks([SeqChunk(prompt, 0, blocks)], all_positions=True)
    return torch.log_softmax(logits.float(), dim=-1).cpu()


def test_each_prompt_token_is_scored_with_its_rank_and_alternatives(builtin_engine) -> None:
    e = builtin_engine
    outputs = run_all(e, {"a": (PROMPTS[0], SamplingParams(max_tokens=3, temperature=0, prompt_logprobs=3))})
    scored = [o.prompt_logprobs for o in outputs if o.prompt_logprobs is not None]
    assert len(scored) == 1 and outputs[0].prompt_logprobs is scored[0]  # handed back once, in the first output
    entries = scored[0]
    ref = reference(e, PROMPTS[0])
    assert len(entries) == len(PROMPTS[0]) and entries[0] is None
    for position, entry in enumerate(entries[1:], start=1):
        row = ref[position - 1]
        assert entry.token_id == PROMPTS[0][position]
        assert entry.logprob == pytest.approx(row[entry.token_id].item(), abs=1e-5)
        assert entry.rank == int((row > row[entry.token_id]).sum()) + 1
        top = torch.topk(row, 3)
        assert [t for t, _ in entry.top] == top.indices.tolist()
        assert [lp for _, lp in entry.top] == pytest.approx(top.values.tolist(), abs=1e-5)


def test_a_scoring_request_generates_nothing_and_may_fill_the_context(builtin_engine) -> None:
    e = builtin_engine
    full = (PROMPTS[0] * 8)[: e.max_model_len]
    outputs = run_all(e, {"score": (full, SamplingParams(max_tokens=0, prompt_logprobs=0))})
    assert len(outputs) == 1
    out = outputs[0]
    assert out.finished and out.finish_reason == "length" and out.token_ids == [] and out.text == ""
    assert len(out.prompt_logprobs) == len(full) and all(entry.top == [] for entry in out.prompt_logprobs[1:])
    assert e.stats()["kv_blocks_used"] == 0
    with pytest.raises(ValueError, match="with room to generate"):
        e.add_request("long", full, SamplingParams(max_tokens=1))
    with pytest.raises(ValueError, match=r"max_tokens: must be an integer >= 1 \(0 only with prompt_logprobs"):
        e.add_request("zero", PROMPTS[1], SamplingParams(max_tokens=0))


@pytest.mark.parametrize("bad", [-1, 21, 1.5, True])
def test_prompt_logprobs_out_of_range_are_refused(bad) -> None:
    with pytest.raises(ValueError, match=r"^prompt_logprobs: must be in \[0, 20\]"):
        SamplingParams(prompt_logprobs=bad).validate()


def test_a_one_token_prompt_has_only_the_null_entry(builtin_engine) -> None:
    outputs = run_all(builtin_engine, {"one": ([7], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True,
                                                                   prompt_logprobs=2))})
    assert [o.prompt_logprobs for o in outputs] == [[None], None]


def test_neighbours_of_a_scored_prompt_get_the_same_numbers(builtin_engine) -> None:
    """Scoring one sequence's prompt changes nothing for the others of the same steps."""
    e = builtin_engine
    plain = SamplingParams(max_tokens=6, temperature=0, logprobs=5, ignore_eos=True)

    def neighbour(scored: SamplingParams) -> RequestOutput:
        e.blocks.drop_cache()  # both runs compute every prompt (a cached prefix is equal to ~1e-6, not bit for bit)
        outputs = run_all(e, {"plain": (PROMPTS[1], plain), "scored": (PROMPTS[0], scored),
                              "short": (PROMPTS[2], scored)})
        return next(o for o in outputs if o.request_id == "plain" and o.finished)

    with_scoring = neighbour(SamplingParams(max_tokens=2, prompt_logprobs=4))
    without = neighbour(SamplingParams(max_tokens=2))
    assert with_scoring.token_ids == without.token_ids
    assert [(lp.token_id, lp.logprob, lp.top) for lp in with_scoring.logprobs] == \
        [(lp.token_id, lp.logprob, lp.top) for lp in without.logprobs]  # bit for bit


def test_a_preempted_sequence_is_scored_once(builtin_engine) -> None:
    e = builtin_engine
    prompts = [[40 + i] * (14 + 16 * (i % 3)) for i in range(6)]  # 2 tokens short of a block boundary
    params = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True, prompt_logprobs=1)
    alone = {i: run_all(e, {f"alone-{i}": (p, params)})[0].prompt_logprobs for i, p in enumerate(prompts)}
    original = e.blocks, e.scheduler
    try:
        e.blocks = BlockManager(7, e.plan.block_size)  # far fewer blocks than 6 sequences need
        e.scheduler = Scheduler(e.blocks, 6, 256)
        outputs = run_all(e, {f"p-{i}": (p, params) for i, p in enumerate(prompts)})
        assert e.scheduler.num_preemptions > 0
    finally:
        e.blocks, e.scheduler = original
    for i in range(len(prompts)):
        scored = [o.prompt_logprobs for o in outputs if o.request_id == f"p-{i}" and o.prompt_logprobs is not None]
        assert len(scored) == 1
        assert [(x.token_id, x.rank) for x in scored[0][1:]] == [(x.token_id, x.rank) for x in alone[i][1:]]
        assert [x.logprob for x in scored[0][1:]] == pytest.approx([x.logprob for x in alone[i][1:]], abs=1e-5)


def test_a_prompt_whose_logits_turn_nan_fails_alone(tmp_path) -> None:
    """A NaN in the embedding of one token (a real broken weight) poisons the positions from that token on (and,
    through masked attention's 0 x NaN, maybe the earlier ones): the request that scores such a prompt ends with an
    error naming the first prompt token it could not score; its neighbour is served."""
    e = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=64))
    poison = 251
    with torch.no_grad():
        e.executor.model.embed[poison] = float("nan")
    outputs = run_all(e, {"bad": ([5, 6, poison, 8, 9], SamplingParams(max_tokens=0, prompt_logprobs=1)),
                          "good": ([5, 6, 7], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True,
                                                                    prompt_logprobs=1))})
    finals = {o.request_id: o for o in outputs if o.finished}
    assert finals["bad"].finish_reason == "error" and finals["bad"].prompt_logprobs is None
    assert finals["bad"].error.code == "non_finite_logits"
    assert re.search(r"NaN or infinite values at prompt token [123];", finals["bad"].error.message)
    assert finals["good"].finish_reason == "length" and len(finals["good"].token_ids) == 2
