"""A step of unequal chunks runs as a few forwards (decodes apart, prompts of similar lengths together), with the
same logits as each chunk run on its own."""

from __future__ import annotations

import torch

from bringup.runner.engine import executor as executor_module
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.executor import MAX_PROMPT_GROUPS, forward_groups
from bringup.runner.model.batch_inputs import SeqChunk
from tests.runner.stated import stated


def chunk(context: int, new: int) -> SeqChunk:
    return SeqChunk([1] * context, context - new, [])


def test_decodes_run_apart_from_prompts():
    chunks = [chunk(40, 1), chunk(200, 200), chunk(90, 1), chunk(30, 30)]
    groups = forward_groups(chunks)
    assert groups[0] == [0, 2]
    assert sorted(i for g in groups[1:] for i in g) == [1, 3]


def test_prompts_of_similar_length_share_a_forward_and_unequal_ones_do_not():
    assert forward_groups([chunk(100, 100), chunk(110, 110), chunk(120, 120)]) == [[0, 1, 2]]
    # three padded to 256 x 256 would cost 2.98x the 16² + 16² + 256² needed
    assert forward_groups([chunk(16, 16), chunk(256, 256), chunk(16, 16)]) == [[0, 2], [1]]


def test_a_step_of_only_decodes_or_one_prompt_is_one_forward():
    assert forward_groups([chunk(40, 1), chunk(300, 1)]) == [[0, 1]]
    assert forward_groups([chunk(64, 64)]) == [[0]]


def test_the_number_of_prompt_forwards_is_bounded():
    lengths = [2**i for i in range(2, 12)]  # each twice the last: every pair pads past the limit
    groups = forward_groups([chunk(n, n) for n in lengths])
    assert len(groups) <= MAX_PROMPT_GROUPS
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))


def test_a_mixed_step_gives_the_logits_of_each_chunk_run_alone(tmp_path, monkeypatch):
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=64,
                                            max_num_seqs=4, measurements=stated()))
    run = engine.executor.run_chunks
    gen = torch.Generator().manual_seed(0)
    tokens = [torch.randint(3, 200, (n,), generator=gen).tolist() for n in (6, 4, 5, 40)]
    run([SeqChunk(tokens[0][:5], 0, [0])])  # the decoding sequence's context is in the cache
    step = [SeqChunk(tokens[0], 5, [0]), SeqChunk(tokens[1], 0, [1]), SeqChunk(tokens[2], 0, [2]),
            SeqChunk(tokens[3], 0, [3, 4, 5])]
    assert forward_groups(step) == [[0], [1, 2], [3]]
    mixed = run(step)
    alone = torch.cat([run([c]) for c in step])
    assert (mixed - alone).abs().max().item() <= 1e-5
    monkeypatch.setattr(executor_module, "forward_groups", lambda chunks: [list(range(len(chunks)))])
    together = run(step)  # one padded forward: the same numbers, at more cost
    assert (together - alone).abs().max().item() <= 1e-5
