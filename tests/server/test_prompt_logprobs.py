"""Prompt logprobs on /v1/completions against a live server, on a random-init tiny Llama saved by the test and on
the real SmolLM2-135M-Instruct: `echo` with `logprobs` (OpenAI's legacy shape: the prompt's tokens first, the first
one null) and vLLM's `prompt_logprobs` (null first, then token id -> {logprob, rank, decoded_token}) equal
transformers' float32 log_softmax of the same prompt within 1e-4; `echo` with `max_tokens` 0 scores a prompt
without generating; streamed echo gives the same numbers; bad combinations are a 400 naming the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

from tests.real_model import smollm2_hf_dir
from tests.runner.hf_fixtures import make_hf_model
from tests.server.serve_live import LiveServer, start_server

TOLERANCE = 1e-4
PROMPTS = {"tiny": "the quick brown fox jumps over the lazy dog",
           "smollm2": "The capital of France is Paris, and the capital of Italy is"}


@dataclass
class Served:
    name: str
    live: LiveServer
    model: Any  # the transformers model of the same directory, float32
    tokenizer: Any  # the directory's tokenizer.json, read by the tokenizers package

    def piece(self, token_id: int) -> str:
        """One token as text, special tokens shown."""
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def post(self, body: dict, path: str = "/v1/completions") -> httpx.Response:
        return httpx.post(f"{self.live.url}{path}", json={"model": self.live.engine.model_name, **body}, timeout=120)

    def ok(self, body: dict) -> dict:
        r = self.post(body)
        assert r.status_code == 200, r.text
        return r.json()

    def ids(self, text: str) -> list[int]:
        """The prompt's token ids as the server makes them (/tokenize)."""
        return self.post({"prompt": text}, "/tokenize").json()["tokens"]

    def reference(self, ids: list[int]) -> torch.Tensor:
        """transformers' log_softmax (float32) of the logits at every position of the prompt."""
        with torch.no_grad():
            logits = self.model(torch.tensor([ids])).logits[0]
        return torch.log_softmax(logits.float(), dim=-1)


def model_dir(name: str, tmp: Path) -> Path:
    if name == "smollm2":
        return smollm2_hf_dir()
    make_hf_model(tmp / "tiny-llama", "llama", vocab=320)
    return tmp / "tiny-llama"


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def served(request, tmp_path_factory) -> Served:
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    tmp = tmp_path_factory.mktemp(request.param)
    directory = model_dir(request.param, tmp)
    live = start_server(tmp, model_dir=directory, max_model_len=256, dtype="float32")
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
    yield Served(request.param, live, model, Tokenizer.from_file(str(directory / "tokenizer.json")))
    live.stop()


def assert_offsets_follow_tokens(logprobs: dict, start: int = 0) -> None:
    expected = [start]
    for token in logprobs["tokens"][:-1]:
        expected.append(expected[-1] + len(token))
    assert logprobs["text_offset"] == expected


def assert_prompt_scores(token_logprobs: list, ids: list[int], ref: torch.Tensor) -> None:
    assert token_logprobs[0] is None
    ours = torch.tensor(token_logprobs[1:len(ids)])
    theirs = ref[torch.arange(len(ids) - 1), torch.tensor(ids[1:])]
    assert (ours - theirs).abs().max().item() <= TOLERANCE


def test_echo_with_logprobs_is_the_prompt_then_the_completion(served: Served) -> None:
    prompt = PROMPTS[served.name]
    ids = served.ids(prompt)
    common = {"prompt": prompt, "max_tokens": 3, "temperature": 0, "logprobs": 2, "ignore_eos": True}
    plain = served.ok(common)["choices"][0]
    echoed = served.ok({**common, "echo": True})["choices"][0]
    assert echoed["text"] == prompt + plain["text"]
    lp = echoed["logprobs"]
    n = len(ids)
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == len(lp["text_offset"]) == n + 3
    assert lp["tokens"][:n] == [served.piece(t) for t in ids]
    assert "".join(lp["tokens"]) == prompt + plain["text"]  # no special token in these prompts
    assert_offsets_follow_tokens(lp)
    assert lp["top_logprobs"][0] is None
    ref = served.reference(ids)
    assert_prompt_scores(lp["token_logprobs"], ids, ref)
    for position in range(1, n):  # each prompt token's two most likely alternatives, keyed by their text
        top = torch.topk(ref[position - 1], 2)
        expected: dict[str, float] = {}
        for token, value in zip(top.indices.tolist(), top.values.tolist()):
            expected.setdefault(served.piece(token), value)  # tokens of the same text: the likelier one is listed
        assert lp["top_logprobs"][position].keys() <= expected.keys()
        for text, value in lp["top_logprobs"][position].items():
            assert abs(value - expected[text]) <= TOLERANCE
    generated = plain["logprobs"]
    assert lp["tokens"][n:] == generated["tokens"] and lp["top_logprobs"][n:] == generated["top_logprobs"]
    assert lp["token_logprobs"][n:] == pytest.approx(generated["token_logprobs"], abs=1e-6)


def test_prompt_logprobs_in_vllms_shape(served: Served) -> None:
    ids = served.ids(PROMPTS[served.name])
    choice = served.ok({"prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 3})["choices"][0]
    assert choice["logprobs"] is None
    scores = choice["prompt_logprobs"]
    assert len(scores) == len(ids) and scores[0] is None
    ref = served.reference(ids)
    for position, entry in enumerate(scores[1:], start=1):
        row, own = ref[position - 1], ids[position]
        keys = list(entry)
        assert keys[0] == str(own) and len(entry) in (3, 4)  # the prompt's token first, then the top 3
        assert abs(entry[str(own)]["logprob"] - row[own].item()) <= TOLERANCE
        above = row - row[own]
        assert int((above > TOLERANCE).sum()) + 1 <= entry[str(own)]["rank"] <= int((above > -TOLERANCE).sum())
        top = torch.topk(row, 3)
        alternatives = [(key, value) for key, value in entry.items() if key != str(own) or value["rank"] <= 3]
        assert sorted(value["rank"] for _, value in alternatives)[-1] <= 3
        for key, value in entry.items():
            assert value["decoded_token"] == served.piece(int(key))
            if value["rank"] <= 3:
                assert abs(value["logprob"] - top.values[value["rank"] - 1].item()) <= TOLERANCE


def test_echo_with_max_tokens_zero_scores_prompts_without_generating(served: Served) -> None:
    """What lm-evaluation-harness-style clients send: token-id prompts, echo, logprobs, nothing to generate."""
    texts = [PROMPTS[served.name], PROMPTS[served.name].split(" ", 3)[-1]]
    prompts = [served.ids(t) for t in texts]
    body = served.ok({"prompt": prompts, "echo": True, "max_tokens": 0, "logprobs": 1, "temperature": 0})
    assert body["usage"]["completion_tokens"] == 0
    assert body["usage"]["prompt_tokens"] == sum(len(p) for p in prompts)
    for choice, ids in zip(body["choices"], prompts):
        assert choice["finish_reason"] == "length"
        assert choice["text"] == served.tokenizer.decode(ids)
        assert len(choice["logprobs"]["tokens"]) == len(ids)
        assert_offsets_follow_tokens(choice["logprobs"])
        assert_prompt_scores(choice["logprobs"]["token_logprobs"], ids, served.reference(ids))
    plain_echo = served.ok({"prompt": texts[0], "echo": True, "max_tokens": 0})["choices"][0]
    assert plain_echo["text"] == texts[0] and plain_echo["logprobs"] is None


def test_streamed_echo_gives_the_same_answer(served: Served) -> None:
    body = {"prompt": PROMPTS[served.name], "echo": True, "logprobs": 2, "max_tokens": 4, "temperature": 0,
            "ignore_eos": True}
    whole = served.ok(body)["choices"][0]
    with httpx.stream("POST", f"{served.live.base_url}/completions",
                      json={"model": served.live.engine.model_name, **body, "stream": True}, timeout=120) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    choices = [e["choices"][0] for e in events]
    assert "".join(c["text"] for c in choices) == whole["text"]
    assert choices[0]["text"].startswith(PROMPTS[served.name])  # the prompt comes with the first chunk
    for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
        assert [x for c in choices if c["logprobs"] for x in c["logprobs"][key]] == whole["logprobs"][key]
    assert choices[-1]["finish_reason"] == "length"


@pytest.fixture(scope="module")
def builtin(tmp_path_factory) -> LiveServer:
    """The request rules do not depend on the model: the built-in one checks them."""
    live = start_server(tmp_path_factory.mktemp("builtin"), max_model_len=64)
    yield live
    live.stop()


def post(live: LiveServer, body: dict, path: str = "/v1/completions") -> httpx.Response:
    return httpx.post(f"{live.url}{path}", json={"model": live.engine.model_name, **body}, timeout=60)


@pytest.mark.parametrize("fields, param, says", [
    ({"prompt_logprobs": 21}, "prompt_logprobs", "prompt_logprobs: Input should be less than or equal to 20"),
    ({"prompt_logprobs": -1}, "prompt_logprobs", "prompt_logprobs: Input should be greater than or equal to 0"),
    ({"prompt_logprobs": "2"}, "prompt_logprobs", "prompt_logprobs: Input should be a valid integer"),
    ({"prompt_logprobs": 1, "stream": True}, "prompt_logprobs", "prompt_logprobs are not available with stream true"),
    ({"max_tokens": 0}, "max_tokens", "max_tokens: Input should be greater than or equal to 1"),
    ({"max_tokens": 0, "echo": False}, "max_tokens", "max_tokens: Input should be greater than or equal to 1"),
    ({"max_tokens": 0, "echo": 1}, "echo", "echo: Input should be a valid boolean"),
    ({"echo": True, "logprobs": 21}, "logprobs", "logprobs: Input should be less than or equal to 20"),
    ({"echo": True, "max_tokens": 0, "prompt": [5] * 65}, "max_tokens",
     "maximum context length is 64 tokens; you requested 65 tokens (65 in the prompt, 0 to generate)"),
])
def test_bad_combinations_are_refused_naming_the_field(builtin: LiveServer, fields, param, says) -> None:
    r = post(builtin, {"prompt": "x", **fields})
    assert r.status_code == 400
    error = r.json()["error"]
    assert error["param"] == param and says in error["message"]


def test_a_scoring_request_may_fill_the_context(builtin: LiveServer) -> None:
    r = post(builtin, {"prompt": [5] * 64, "echo": True, "max_tokens": 0, "logprobs": 0})
    assert r.status_code == 200, r.text
    assert len(r.json()["choices"][0]["logprobs"]["tokens"]) == 64


def test_max_tokens_zero_scores_the_prompt_with_echo_and_with_prompt_logprobs_alike(builtin: LiveServer) -> None:
    """Both ask for the prompt's scores, so both may generate nothing (it was refused with prompt_logprobs alone)."""
    prompt = [5, 9, 2, 7, 7, 3]
    echoed = post(builtin, {"prompt": prompt, "echo": True, "max_tokens": 0, "logprobs": 1})
    scored = post(builtin, {"prompt": prompt, "prompt_logprobs": 1, "max_tokens": 0})
    assert echoed.status_code == scored.status_code == 200, (echoed.text, scored.text)
    for body in (echoed.json(), scored.json()):
        assert body["usage"]["completion_tokens"] == 0 and body["choices"][0]["finish_reason"] == "length"
    choice = scored.json()["choices"][0]
    assert choice["text"] == "" and choice["prompt_logprobs"][0] is None
    own = [entry[str(token)]["logprob"] for entry, token in zip(choice["prompt_logprobs"][1:], prompt[1:])]
    assert own == pytest.approx(echoed.json()["choices"][0]["logprobs"]["token_logprobs"][1:], abs=1e-6)
    assert post(builtin, {"prompt": prompt, "max_tokens": 0}).status_code == 400  # nothing asked of the prompt


def test_prompt_logprobs_are_refused_on_chat(builtin: LiveServer) -> None:
    r = post(builtin, {"messages": [{"role": "user", "content": "x"}], "prompt_logprobs": 1}, "/v1/chat/completions")
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt_logprobs"
