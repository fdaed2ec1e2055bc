"""GGUF files written here from random-init transformers models (llama, qwen2, qwen3; F32, F16, BF16, Q8_0, Q4_0 and
Q4_1 tensors) load through `--model FILE.gguf` and match transformers reading the same file (`gguf_file=`): float32
logits within 1e-4, 32 identical greedy tokens, identical chat-template tokens."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from tests.runner.gguf_files import T, mixed_types, write_gguf
from tests.runner.hf_fixtures import make_hf_model, random_model, save_tokenizer
from tests.runner.parity_check import assert_matches_transformers

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def low_bit_types(name: str, tensor: torch.Tensor) -> object:
    """BF16 embedding and head, Q4_0 in even layers, Q4_1 in odd ones."""
    if tensor.dim() == 1:
        return T.F32
    if not name.startswith("blk."):
        return T.BF16
    return T.Q4_0 if int(name.split(".")[1]) % 2 == 0 else T.Q4_1


def qwen3_model(path: Path) -> torch.nn.Module:
    """head_dim 128 (Qwen3's, unlike hidden / heads): transformers reads a qwen3 GGUF's head size as that default."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=128, max_position_embeddings=256,
                         tie_word_embeddings=True, bos_token_id=0, eos_token_id=1)
    path.mkdir(parents=True, exist_ok=True)
    save_tokenizer(path, 320)
    return random_model(config, Qwen3ForCausalLM, seed=2)


CASES = {
    "llama-untied-f16-q8_0": ("llama", dict(tied=False), mixed_types),
    "llama-tied-bf16-q4_0-q4_1": ("llama", dict(tied=True, layers=2), low_bit_types),
    "qwen2-bias-tied-f16-q8_0": ("qwen2", dict(tied=True), mixed_types),
    "qwen3-qk-norm-f16-q8_0": ("qwen3", None, mixed_types),
}


def transformers_from_gguf(path: Path) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    return model


@pytest.mark.parametrize("case", list(CASES))
def test_a_gguf_file_matches_transformers_reading_it(tmp_path, case):
    arch, options, types = CASES[case]
    source = tmp_path / "hf"
    hf = qwen3_model(source) if options is None else make_hf_model(source, arch, **options)
    path = write_gguf(tmp_path / "tiny.gguf", hf, source, arch, types)
    engine = LLMEngine.create(EngineOptions(model_dir=path, device="cpu", max_model_len=128, max_num_seqs=2,
                                            profile_path=tmp_path / "absent.yaml"))
    assert engine.model_name == "tiny"
    prompt = torch.randint(2, 320, (40,), generator=torch.Generator().manual_seed(7)).tolist()
    assert_matches_transformers(engine, transformers_from_gguf(path), prompt)


def test_the_gguf_tokenizer_and_chat_template_match_transformers_reading_the_file(tmp_path):
    from transformers import AutoTokenizer

    hf = make_hf_model(tmp_path / "hf", "qwen2", tied=True)
    path = write_gguf(tmp_path / "tiny.gguf", hf, tmp_path / "hf", "qwen2")
    engine = LLMEngine.create(EngineOptions(model_dir=path, device="cpu", max_model_len=128, max_num_seqs=2,
                                            profile_path=tmp_path / "absent.yaml"))
    reference = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    messages = [{"role": "user", "content": "hello world, the quick brown fox 12345 jumps!\n\n  over"},
                {"role": "assistant", "content": "paged attention with block tables"}]
    ours = engine.tokenizer.encode_chat(messages)
    assert ours == reference.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    assert engine.tokenizer.decode(ours, skip_special_tokens=False) == reference.decode(ours)
    assert engine.tokenizer.eos_token_ids == [1]


def test_add_bos_and_named_chat_templates_come_from_the_metadata(tmp_path):
    from transformers import AutoTokenizer

    hf = make_hf_model(tmp_path / "hf", "llama", tied=True)
    tool_template = "{{ bos_token }}tools:{{ tools | length }}{% for m in messages %}|{{ m['content'] }}{% endfor %}"
    path = write_gguf(tmp_path / "tiny.gguf", hf, tmp_path / "hf", "llama", add_bos=True,
                      texts={"tokenizer.chat_template.tool_use": tool_template})
    engine = LLMEngine.create(EngineOptions(model_dir=path, device="cpu", max_model_len=128, max_num_seqs=2,
                                            profile_path=tmp_path / "absent.yaml"))
    reference = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    text = "the quick brown fox"
    assert engine.tokenizer.encode(text)[0] == engine.tokenizer.bos_token_id == 0
    assert engine.tokenizer.encode(text) == reference.encode(text)
    assert engine.tokenizer.encode(text, add_special_tokens=False) == reference.encode(text, add_special_tokens=False)
    messages = [{"role": "user", "content": "hi"}]
    assert engine.tokenizer.apply_chat_template(messages, tools=[{"type": "function"}]) == "<s>tools:1|hi"
    assert engine.tokenizer.apply_chat_template(messages).startswith("<s>user\nhi</s>")


def test_bringup_serve_serves_a_gguf_file(tmp_path):
    """The real `bringup serve --model FILE.gguf` process: the model listed by the file's name, its chat template
    applied, the tokens the engine gives in-process."""
    import httpx

    from tests.server.serve_live import free_port, spawn_cli, wait_healthy

    hf = make_hf_model(tmp_path / "hf", "qwen2", tied=True)
    path = write_gguf(tmp_path / "tiny.gguf", hf, tmp_path / "hf", "qwen2")
    engine = LLMEngine.create(EngineOptions(model_dir=path, device="cpu", max_model_len=128, max_num_seqs=2,
                                            profile_path=tmp_path / "absent.yaml"))
    messages = [{"role": "user", "content": "hello world"}]
    prompt = engine.tokenizer.encode_chat(messages)
    greedy = engine.generate([prompt], SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True))[0]
    port = free_port()
    proc = spawn_cli(["serve", "--model", str(path), "--port", str(port), "--device", "cpu", "--max-model-len",
                      "128", "--profile", str(tmp_path / "absent.yaml")], cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=120, proc=proc)
        assert [m["id"] for m in httpx.get(f"{url}/v1/models").json()["data"]] == ["tiny"]
        reply = httpx.post(f"{url}/v1/chat/completions", timeout=60, json={
            "model": "tiny", "messages": messages, "max_tokens": 8, "temperature": 0, "ignore_eos": True}).json()
        assert reply["usage"]["prompt_tokens"] == len(prompt) and reply["usage"]["completion_tokens"] == 8
        assert reply["choices"][0]["message"]["content"] == engine.tokenizer.decode(greedy.token_ids)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
