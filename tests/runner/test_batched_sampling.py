"""The batched sampler (greedy rows, seeded draws, filtered distributions, logprobs, extreme parameters) and
the incremental detokenizers."""

from __future__ import annotations

import math
import random

import pytest
import torch

from bringup.runner.engine.sampling import sample
from bringup.runner.engine.sequence import Sequence
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.text.tokenizer import ByteTokenizer, HFTokenizer
from tests.runner.hf_fixtures import save_tokenizer

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
VOCAB = 50


def make_seq(params: SamplingParams, seed: int = 0, token_ids: list[int] | None = None) -> Sequence:
    ids = [3, 4, 5] if token_ids is None else token_ids
    return Sequence(f"r{seed}", list(ids), len(ids), params, 0, generator=torch.Generator().manual_seed(seed),
                    logprobs=[] if params.logprobs is not None else None)


def random_logits(rows: int, seed: int, device: str, vocab: int = VOCAB) -> torch.Tensor:
    return (3 * torch.randn(rows, vocab, generator=torch.Generator().manual_seed(seed))).to(device)


MIXED = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=0.8),
    SamplingParams(temperature=1.0, top_k=1),  # greedy too
    SamplingParams(temperature=1.2, top_k=10, top_p=0.9),
    SamplingParams(temperature=0.0, repetition_penalty=1.5, logprobs=2),
    SamplingParams(temperature=1.0, min_p=0.1),
]


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_rows_are_the_argmax(device):
    logits = random_logits(len(MIXED), 1, device)
    seqs = [make_seq(p, seed=i) for i, p in enumerate(MIXED)]
    tokens = [t for t, _ in sample(logits, seqs)]
    argmax = logits.argmax(dim=-1).tolist()
    assert [tokens[i] for i in (0, 2)] == [argmax[i] for i in (0, 2)]
    only_greedy = [make_seq(SamplingParams(temperature=0.0)) for _ in range(4)]
    assert [t for t, _ in sample(logits[:4], only_greedy)] == argmax[:4]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("params", [SamplingParams(temperature=0.9),
                                    SamplingParams(temperature=1.1, top_k=20, top_p=0.95, min_p=0.01)],
                         ids=["plain", "filtered"])
def test_a_seeded_row_does_not_depend_on_its_neighbours(device, params):
    row = random_logits(1, 2, device) / 3  # flat enough to draw many different tokens
    neighbours = random_logits(len(MIXED), 3, device)

    def draws(before: list[int], after: list[int]) -> list[int]:
        seqs = [make_seq(MIXED[i], seed=10 + i) for i in before] + [make_seq(params, seed=7)] + \
               [make_seq(MIXED[i], seed=20 + i) for i in after]
        logits = torch.cat([neighbours[before], row, neighbours[after]])
        return [sample(logits, seqs)[len(before)][0] for _ in range(30)]

    alone = draws([], [])
    assert len(set(alone)) > 3  # it really samples
    assert draws([1, 3], [5]) == alone
    assert draws([0, 2, 4], [1, 3, 5]) == alone
    assert draws([], [3, 3, 1]) == alone


def reference_distribution(logits: list[float], p: SamplingParams) -> list[float]:
    """The filtered softmax in float64, written out plainly."""
    weights = [math.exp((x - max(logits)) / p.temperature) for x in logits]
    order = sorted(range(len(logits)), key=lambda i: -logits[i])
    kept = order[: p.top_k] if p.top_k > 0 else order
    if p.top_p < 1.0:
        total, mass, nucleus = sum(weights[i] for i in kept), 0.0, []
        for i in kept:
            nucleus.append(i)
            mass += weights[i] / total
            if mass >= p.top_p:
                break
        kept = nucleus
    if p.min_p > 0.0:
        kept = [i for i in kept if weights[i] >= p.min_p * weights[kept[0]]]
    total = sum(weights[i] for i in kept)
    return [weights[i] / total if i in kept else 0.0 for i in range(len(logits))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("params", [
    SamplingParams(temperature=1.0),
    SamplingParams(temperature=0.7, top_k=4),
    SamplingParams(temperature=1.3, top_p=0.75),
    SamplingParams(temperature=1.0, min_p=0.3),
    SamplingParams(temperature=0.9, top_k=5, top_p=0.9, min_p=0.05),
], ids=["temperature", "top_k", "top_p", "min_p", "all"])
def test_draws_follow_the_filtered_softmax(device, params):
    logits = [0.3, 2.0, -1.0, 1.1, 0.9, 1.6, -0.4, 0.0]
    n = 4000
    seqs = [make_seq(params, seed=1000 + i) for i in range(n)]
    tokens = [t for t, _ in sample(torch.tensor([logits] * n, device=device), seqs)]
    counts = [tokens.count(v) for v in range(len(logits))]
    for expected, count in zip(reference_distribution(logits, params), counts):
        if expected == 0.0:
            assert count == 0
        else:  # 4.5 standard deviations of a binomial frequency: fixed seeds make this deterministic
            assert abs(count / n - expected) <= 4.5 * math.sqrt(expected * (1 - expected) / n)


@pytest.mark.parametrize("device", DEVICES)
def test_logprobs_are_the_log_softmax_of_the_penalised_logits(device):
    logits = random_logits(3, 4, device)
    prompts = [[1, 2, 3, 9], [7, 7, 8], [40, 41]]
    params = [SamplingParams(temperature=0.8, top_k=5, repetition_penalty=1.7, logprobs=3),
              SamplingParams(temperature=0.0, logprobs=0),
              SamplingParams(temperature=1.0, repetition_penalty=0.6, logprobs=5)]
    seqs = [make_seq(p, seed=i, token_ids=ids) for i, (p, ids) in enumerate(zip(params, prompts))]
    results = sample(logits, seqs)
    for row, ids, p, (token, lp) in zip(logits.cpu(), prompts, params, results):
        penalised = row.clone()
        for t in set(ids):
            score = penalised[t]
            penalised[t] = score / p.repetition_penalty if score > 0 else score * p.repetition_penalty
        expected = torch.log_softmax(penalised, dim=-1)
        assert lp is not None and lp.token_id == token
        assert abs(lp.logprob - float(expected[token])) <= 1e-6
        top = torch.topk(expected, p.logprobs or 0)
        assert [i for i, _ in lp.top] == top.indices.tolist()
        assert max((abs(v - e) for (_, v), e in zip(lp.top, top.values.tolist())), default=0.0) <= 1e-6


@pytest.mark.parametrize("device", DEVICES)
def test_extreme_parameters_pick_the_top_token_and_spare_the_neighbours(device):
    logits = random_logits(5, 5, device)
    logits[2] = float("nan")
    logits[3, :] = float("-inf")
    logits[4, 7] = 1e30
    params = [SamplingParams(temperature=1e-30), SamplingParams(temperature=1e-8, top_p=1e-300),
              SamplingParams(temperature=1.0, seed=1), SamplingParams(temperature=1.0, top_k=3),
              SamplingParams(temperature=1e-30, top_p=1e-300, logprobs=1)]
    tokens = [t for t, _ in sample(logits, [make_seq(p, seed=i) for i, p in enumerate(params)])]
    assert all(0 <= t < VOCAB for t in tokens)
    assert tokens[:2] == logits[:2].argmax(dim=-1).tolist()
    assert tokens[4] == 7
    neighbour = SamplingParams(temperature=1.0)
    good = [make_seq(neighbour, seed=9) for _ in range(2)]
    with_bad = sample(logits[[0, 2]], [good[0], make_seq(params[2], seed=2)])[0][0]
    assert with_bad == sample(logits[[0]], [good[1]])[0][0]


# ---------------------------------------------------------------- incremental detokenization

TEXTS = ["héllo wörld", "中文字符", "emoji 😀 and 𝄞", "naïve café ☃", "plain ascii", " spaced  out "]


def detokenize(tokenizer, ids: list[int]) -> tuple[str, list[str]]:
    detokenizer = tokenizer.detokenizer()
    pieces = [detokenizer.add(i) for i in ids]
    return "".join(pieces) + detokenizer.flush(), pieces


def random_text_ids(tokenizer, rng: random.Random, specials: list[int]) -> list[int]:
    """Encoded words (multi-byte characters split over byte tokens), sometimes with special tokens between."""
    ids: list[int] = []
    for _ in range(rng.randrange(1, 10)):
        word = rng.choice(TEXTS)
        start = rng.randrange(len(word))
        ids += tokenizer.encode(word[start:start + rng.randrange(1, 8)], add_special_tokens=False)
        if rng.random() < 0.2:
            ids.append(rng.choice(specials))
    return ids


def test_byte_detokenizer_equals_the_full_decode():
    tok, rng = ByteTokenizer(), random.Random(0)
    for _ in range(300):
        ids = random_text_ids(tok, rng, specials=[0, 1, 3])
        garbage = [rng.randrange(tok.vocab_size) for _ in range(rng.randrange(20))]
        for sequence in (ids, garbage, ids + garbage + ids):
            assert detokenize(tok, sequence)[0] == tok.decode(sequence)


def test_byte_detokenizer_emits_what_is_decided_at_once():
    tok = ByteTokenizer()
    ids = [b + tok.offset for b in b"a\xffb\xc3c\xc3\xa9"]
    assert detokenize(tok, ids)[1] == ["a", "\ufffd", "b", "", "\ufffdc", "", "é"]


def test_hf_detokenizer_equals_the_full_decode(tmp_path):
    save_tokenizer(tmp_path, 320)
    tok, rng = HFTokenizer.from_dir(tmp_path), random.Random(1)
    specials = sorted(tok.special_token_ids)
    for _ in range(300):
        ids = random_text_ids(tok, rng, specials)
        text, pieces = detokenize(tok, ids)
        assert text == tok.decode(ids)
        assert all("\ufffd" not in piece for piece in pieces)  # complete characters only, never a stand-in
    waits = detokenize(tok, tok.encode("ab😀", add_special_tokens=False))[1]
    assert waits[-1] == "😀" and "".join(waits[:-1]) == "ab"
