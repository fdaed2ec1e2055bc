"""Sampling: filters, seeded reproducibility, stop conditions, logprobs."""

from __future__ import annotations

import math

import torch

from bringup.runner.engine.sampling import filter_logits
from bringup.runner.sampling_params import SamplingParams


def test_filters_keep_what_they_promise():
    row = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1]))
    assert torch.isfinite(filter_logits(row, 2, 1.0, 0.0)).tolist() == [True, True, False, False]
    assert torch.isfinite(filter_logits(row, 0, 0.7, 0.0)).tolist() == [True, True, False, False]
    assert torch.isfinite(filter_logits(row, 0, 0.45, 0.0)).tolist() == [True, False, False, False]
    assert torch.isfinite(filter_logits(row, 0, 1.0, 0.3)).tolist() == [True, True, True, False]


def test_seeded_sampling_is_reproducible_per_request(builtin_engine):
    e = builtin_engine
    prompt = e.tokenizer.encode("seeded ")
    other = e.tokenizer.encode("some other concurrent request")

    def run(seed: int, with_neighbour: bool) -> list[int]:
        params = SamplingParams(max_tokens=12, temperature=1.0, top_p=0.9, top_k=50, seed=seed, ignore_eos=True)
        prompts = [prompt, other] if with_neighbour else [prompt]
        return e.generate(prompts, params)[0].token_ids

    alone = run(3, with_neighbour=False)
    assert run(3, with_neighbour=True) == alone
    assert run(4, with_neighbour=False) != alone
    assert e.stats()["kv_blocks_used"] == 0


def test_stop_conditions_and_logprobs(builtin_engine):
    e = builtin_engine
    prompt = e.tokenizer.encode("stop ")
    greedy = e.generate([prompt], SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True))[0]
    assert greedy.finish_reason == "length" and len(greedy.token_ids) == 10

    stop_id = greedy.token_ids[3]
    by_id = e.generate([prompt], SamplingParams(max_tokens=10, temperature=0.0, stop_token_ids=[stop_id]))[0]
    assert by_id.finish_reason == "stop" and by_id.token_ids[-1] == stop_id

    text = e.tokenizer.decode(greedy.token_ids)
    stop = text[4:6]
    by_text = e.generate([prompt], SamplingParams(max_tokens=10, temperature=0.0, stop=[stop]))[0]
    assert by_text.finish_reason == "stop" and stop not in by_text.text and text.startswith(by_text.text)

    with_lp = e.generate([prompt], SamplingParams(max_tokens=3, temperature=0.0, logprobs=2))[0]
    assert len(with_lp.logprobs) == len(with_lp.token_ids)
    first = with_lp.logprobs[0]
    assert first.token_id == greedy.token_ids[0] and len(first.top) == 2
    assert first.top[0][0] == first.token_id and math.isclose(first.top[0][1], first.logprob)


def test_repetition_penalty_changes_greedy_choice(builtin_engine):
    e = builtin_engine
    prompt = e.tokenizer.encode("aaaa")
    plain = e.generate([prompt], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))[0]
    penalised = e.generate([prompt], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True,
                                                    repetition_penalty=50.0))[0]
    assert plain.token_ids != penalised.token_ids
    assert len(set(penalised.token_ids)) == len(penalised.token_ids)  # a harsh penalty never repeats


def test_extreme_top_p_and_temperature_still_sample_without_harming_a_neighbour(builtin_engine):
    e = builtin_engine
    prompt, other = e.tokenizer.encode("extreme "), e.tokenizer.encode("a well-behaved neighbour")
    row = torch.log(torch.tensor([0.5, 0.25, 0.15, 0.1]))
    assert torch.isfinite(filter_logits(row, 0, 1e-300, 0.0)).tolist() == [True, False, False, False]
    neighbour = SamplingParams(max_tokens=6, temperature=0.8, seed=5, ignore_eos=True)
    alone = e.generate([other], neighbour)[0].token_ids
    extreme = SamplingParams(max_tokens=6, temperature=1e-8, top_p=1e-300, seed=1, ignore_eos=True)
    e.add_request("extreme", prompt, extreme)
    e.add_request("neighbour", other, neighbour)
    final: dict = {}
    while e.has_unfinished():
        for out in e.step():
            if out.finished:
                final[out.request_id] = out
    good = final["neighbour"]
    assert len(final["extreme"].token_ids) == 6 and final["extreme"].finish_reason == "length"
    assert good.token_ids == alone
    greedy = e.generate([prompt], SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True))[0]
    assert final["extreme"].token_ids == greedy.token_ids  # a near-zero temperature is greedy
    assert e.stats()["kv_blocks_used"] == 0
