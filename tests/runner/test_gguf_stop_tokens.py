"""Which tokens end generation for a GGUF file: its *_token_id keys, and, when it names no end-of-turn id, the control
tokens llama.cpp ends a turn at by their text (Gemma's files name only <eos>; its turns end with <end_of_turn>)."""

from pathlib import Path

from bringup.runner.sources.gguf.reader import open_gguf
from bringup.runner.sources.gguf.tokenizer import gguf_tokenizer_data
from tests.runner.test_gguf_sentencepiece import CONTROL, LLAMA2_TOKENS, NORMAL, USER_DEFINED, write_llama2_style

EXTRA = [("<end_of_turn>", CONTROL), ("<|im_end|>", USER_DEFINED), ("<start_of_turn>", CONTROL)]
TOKENS = LLAMA2_TOKENS + EXTRA
END_OF_TURN, IM_END = len(LLAMA2_TOKENS), len(LLAMA2_TOKENS) + 1


def with_turn_tokens(path: Path, **changes: object) -> Path:
    return write_llama2_style(path, **{
        "tokenizer.ggml.tokens": [t for t, _ in TOKENS], "tokenizer.ggml.token_type": [k for _, k in TOKENS],
        "tokenizer.ggml.scores": [-float(i) if kind == NORMAL else 0.0 for i, (_, kind) in enumerate(TOKENS)],
        **changes})


def test_a_control_end_of_turn_token_stops_generation_and_says_why(tmp_path):
    data = gguf_tokenizer_data(open_gguf(with_turn_tokens(tmp_path / "gemma-like.gguf")))
    assert data.generation == {"eos_token_id": [2, END_OF_TURN]}  # </s>, then <end_of_turn>; not <start_of_turn>
    assert "'<end_of_turn>' by text, as llama.cpp ends a turn at them" in data.generation_source


def test_a_user_defined_token_with_such_a_text_does_not(tmp_path):
    data = gguf_tokenizer_data(open_gguf(with_turn_tokens(tmp_path / "plain.gguf")))
    assert IM_END not in data.generation["eos_token_id"]


def test_a_named_end_of_turn_id_is_used_alone(tmp_path):
    path = with_turn_tokens(tmp_path / "named.gguf", **{"tokenizer.ggml.eot_token_id": IM_END})
    data = gguf_tokenizer_data(open_gguf(path))
    assert data.generation == {"eos_token_id": [2, IM_END]}
    assert "by text" not in data.generation_source
