"""SentencePiece vocabularies from GGUF metadata (`tokenizer.ggml.model` "llama") tokenize as transformers
(`gguf_file=`) and llama.cpp (llama-cpp-python, `special=True`: special-token strings in the text are those tokens,
the BPE path's convention) do on the same file: Gemma 3 270M's 262,144 tokens, and a small Llama-2-style vocabulary
written here (space prefix, byte tokens, a control and a user-defined token). Decoding gives transformers' text.

Where the two references disagree bringup follows llama.cpp, the format's own reader: a run of more than 31 spaces
in Gemma (the longest space token first, where transformers pairs shorter runs), a typed ▁ (a character here, one of
Gemma's space tokens in transformers), and, under a space prefix, text that starts with a space or follows a token
matched whole (llama.cpp puts the ▁ there too). A hostile vocabulary is refused in one line naming the file and key.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from bringup.errors import BringupError
from bringup.runner.sources.gguf import sentencepiece
from bringup.runner.sources.gguf.reader import open_gguf
from bringup.runner.sources.gguf.tokenizer import gguf_tokenizer_data
from bringup.runner.text.tokenizer import HFTokenizer
from tests.real_model import CACHE, gemma3_gguf

gguf = pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package (pip install 'bringup[gguf]')")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
TEXTS = ["", "Hello world", "  two leading spaces", "trailing spaces   ", "tabs\tand\t\ttwo", "new\nlines\n\n\nthree",
         " \t\n mixed \n\t ", "3.14159, 1,000,000 and 12345678901234567890", "🚀🎉 👍🏽 👨‍👩‍👧",
         "東京は日本の首都です。中文测试", "naïve café résumé — Ωmega, e\u0301", "\x00\x01\x7f bytes \U0010fffd",
         "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", "<bos>twice<eos>", "<b>bold</b> [multimodal]",
         "<unk> and a literal <0x41>", "def f(x):\n    return x**2  # ok"]
GEMMA_DISAGREEMENTS = ["x" + " " * 40 + "y", "32 spaces" + " " * 32 + "|", "▁▁ typed bars"]
START_OF_TURN, GEMMA_BYTES = 105, range(238, 238 + 256)


@pytest.fixture(scope="module")
def gemma_path() -> Path:
    return gemma3_gguf()


@pytest.fixture(scope="module")
def gemma(gemma_path) -> HFTokenizer:  # type: ignore[no-untyped-def]
    return HFTokenizer(gguf_tokenizer_data(open_gguf(gemma_path)))


@pytest.fixture(scope="module")
def gemma_transformers(gemma_path) -> Any:  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(transformers_tokenizer_dir(gemma_path)))


@pytest.fixture(scope="module")
def gemma_llama_cpp(gemma_path) -> Any:  # type: ignore[no-untyped-def]
    with llama_cpp_vocabulary(gemma_path) as vocabulary:
        yield vocabulary


@contextmanager
def llama_cpp_vocabulary(path: Path) -> Iterator[Any]:
    """llama.cpp's reading of the file's vocabulary (no weights), closed after use."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama.cpp's own tokenizer (llama-cpp-python)")
    vocabulary = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    try:
        yield vocabulary
    finally:
        vocabulary.close()


def transformers_tokenizer_dir(path: Path) -> Path:
    """transformers' tokenizer of the Gemma file, built from it once (about 40 s) and saved in the test-model cache
    by transformers' version; later runs load the saved one."""
    import transformers
    from transformers import AutoTokenizer

    target = CACHE / f"{path.stem}-tokenizer-transformers-{transformers.__version__}"
    with FileLock(str(CACHE / ".lock")):
        if not (target / "tokenizer.json").exists():
            staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=".partial-"))
            try:
                AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name).save_pretrained(staging)
                os.replace(staging, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    return target


def test_gemma_tokenizes_as_transformers_and_decodes_back(gemma, gemma_transformers):
    for text in TEXTS:
        ours = gemma.encode(text, add_special_tokens=True)
        assert ours == gemma_transformers.encode(text, add_special_tokens=True), text
        assert gemma.encode(text, add_special_tokens=False) == ours[1:], text  # the file's add_bos_token
        for skip in (False, True):
            assert gemma.decode(ours, skip) == gemma_transformers.decode(ours, skip_special_tokens=skip), text
        assert gemma.decode(ours[1:], skip_special_tokens=False) == text
    assert gemma.encode("") == [gemma.bos_token_id] == [2]
    assert gemma.encode(TEXTS[12], add_special_tokens=False)[0] == START_OF_TURN  # parsed as the special token
    assert set(gemma.encode("\x00 \U0010fffd", add_special_tokens=False)) & set(GEMMA_BYTES)  # byte fallback
    assert gemma.vocab_size == 262144


def test_gemma_tokenizes_as_llama_cpp_also_where_transformers_differs(gemma, gemma_llama_cpp):
    for text in TEXTS + GEMMA_DISAGREEMENTS:
        for add in (True, False):
            ours = gemma.encode(text, add_special_tokens=add)
            assert ours == gemma_llama_cpp.tokenize(text.encode(), add_bos=add, special=True), (text, add)
    assert gemma.encode("x" + " " * 40 + "y", add_special_tokens=False)[1:3] == [167, 145]  # 31 spaces, then 9


LLAMA2_PIECES = [("▁", "t"), ("l", "l"), ("▁", "h"), ("h", "e"), ("▁t", "he"), ("▁h", "e"), ("▁he", "ll"),
                 ("▁hell", "o"), ("o", "r"), ("▁", "w"), ("▁w", "or"), ("l", "d"), ("▁wor", "ld"), ("▁", "▁"),
                 ("▁▁", "▁▁"), ("1", "2"), ("12", "3"), ("i", "n"), ("in", "g"), ("▁", "a"), ("c", "a"),
                 ("▁", "ca"), ("▁ca", "f"), ("▁caf", "é"), ("▁t", "a"), ("b", "s")]  # as BPE learnt them, in order
LLAMA2_TOKENS = [("<unk>", UNKNOWN), ("<s>", CONTROL), ("</s>", CONTROL), *((f"<0x{b:02X}>", BYTE) for b in range(256)),
                 ("<|tool|>", CONTROL), ("<think>", USER_DEFINED), *((a + b, NORMAL) for a, b in LLAMA2_PIECES),
                 *((c, NORMAL) for c in "▁ehltorwdnigacfébs123.,!\n\t")]
LLAMA2_ID = {token: i for i, (token, _) in enumerate(LLAMA2_TOKENS)}
LLAMA2_AGREED = ["", "hello world", "the hello", "hello  world    the", "12345 123", "café tabs\tthe\n\nline",
                 "東京 🚀 zzz", "hello<think>", "<s>", "hello world</s>"]
LLAMA2_DISAGREED = [" hello", "  the", "<think>hello", "a<|tool|>b", "<s>hello"]


def write_llama2_style(path: Path, **changes: Any) -> Path:
    """A small SentencePiece vocabulary as llama.cpp's converter writes Llama 2's: <unk>, <s>, </s>, the 256 byte
    tokens, a control and a user-defined token, merged pieces (scored best first) and single characters; no
    tensors. `changes` replaces metadata values (None leaves the key out)."""
    values: dict[str, Any] = {
        "tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": [t for t, _ in LLAMA2_TOKENS],
        "tokenizer.ggml.scores": [-float(i) if kind == NORMAL else 0.0 for i, (_, kind) in enumerate(LLAMA2_TOKENS)],
        "tokenizer.ggml.token_type": [kind for _, kind in LLAMA2_TOKENS], "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2, "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.add_bos_token": True, "tokenizer.ggml.add_space_prefix": True, **changes}
    writer = gguf.GGUFWriter(str(path), "llama")
    for key, value in {"block_count": 1, "context_length": 64, "embedding_length": 8, "feed_forward_length": 16,
                       "attention.head_count": 2, "attention.head_count_kv": 2, "rope.dimension_count": 4}.items():
        writer.add_uint32(f"llama.{key}", value)
    writer.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    for key, value in values.items():
        if isinstance(value, list):
            writer.add_array(key, value)  # typed by the first item: scores as float32, as the converter writes them
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_uint32(key, value)
        elif value is not None:
            writer.add_string(key, value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture(scope="module")
def llama2_path(tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    return write_llama2_style(tmp_path_factory.mktemp("spm") / "llama2-style.gguf")


def test_a_llama2_style_vocabulary_tokenizes_as_transformers(llama2_path):
    from transformers import AutoTokenizer

    ours = HFTokenizer(gguf_tokenizer_data(open_gguf(llama2_path)))
    reference = AutoTokenizer.from_pretrained(str(llama2_path.parent), gguf_file=llama2_path.name)
    for text in LLAMA2_AGREED:
        ids = ours.encode(text)
        assert ids == reference.encode(text), text
        for skip in (False, True):
            assert ours.decode(ids, skip) == reference.decode(ids, skip_special_tokens=skip), text
        assert ours.decode(ids[1:], skip_special_tokens=False) == text
    assert ours.encode("hello world") == [1, LLAMA2_ID["▁hello"], LLAMA2_ID["▁world"]]
    assert ours.encode("东") == [1, LLAMA2_ID["▁"], *(3 + b for b in "东".encode())]  # <0xE4> <0xB8> <0x9C>
    assert ours.encode("<|tool|><think>", add_special_tokens=False) == [LLAMA2_ID["<|tool|>"], LLAMA2_ID["<think>"]]
    for text in LLAMA2_DISAGREED[:2]:  # transformers decodes these without their leading space
        assert ours.decode(ours.encode(text)) == text  # the prefix ▁ stripped, the text's own space kept


def test_a_llama2_style_vocabulary_tokenizes_as_llama_cpp(llama2_path):
    ours = HFTokenizer(gguf_tokenizer_data(open_gguf(llama2_path)))
    with llama_cpp_vocabulary(llama2_path) as reference:
        for text in LLAMA2_AGREED + LLAMA2_DISAGREED:
            assert ours.encode(text) == reference.tokenize(text.encode(), add_bos=True, special=True), text


def test_defaults_follow_llama_cpp_when_the_keys_are_absent(tmp_path):
    path = write_llama2_style(tmp_path / "bare.gguf", **{"tokenizer.ggml.add_bos_token": None,
                                                        "tokenizer.ggml.add_space_prefix": None})
    ours = HFTokenizer(gguf_tokenizer_data(open_gguf(path)))
    assert ours.encode("the") == [1, LLAMA2_ID["▁the"]]  # BOS added, a space put before the text


def test_without_a_space_prefix_spaces_stay_where_they_are(tmp_path):
    path = write_llama2_style(tmp_path / "no-prefix.gguf", **{"tokenizer.ggml.add_space_prefix": False})
    ours = HFTokenizer(gguf_tokenizer_data(open_gguf(path)))
    assert ours.encode("the the", add_special_tokens=False) == [LLAMA2_ID[t] for t in ("t", "he", "▁the")]
    assert ours.decode(ours.encode(" the ")) == " the "


TOKENS = len(LLAMA2_TOKENS)
WORDS = [token for token, _ in LLAMA2_TOKENS]


@pytest.mark.parametrize(("changes", "words"), [
    ({"tokenizer.ggml.scores": [0.0] * 3}, ("tokenizer.ggml.scores has 3 entries for", "re-convert")),
    ({"tokenizer.ggml.scores": [0.0] * 100 + [math.nan] + [0.0] * (TOKENS - 101)}, ("token 100", "nan")),
    ({"tokenizer.ggml.scores": None}, ("'tokenizer.ggml.scores' is missing",)),
    ({"tokenizer.ggml.token_type": [NORMAL] * 5}, ("tokenizer.ggml.token_type has 5 entries",)),
    ({"tokenizer.ggml.bos_token_id": 10**6}, ("tokenizer.ggml.bos_token_id is 1000000", "outside")),
    ({"tokenizer.ggml.tokens": [*WORDS[:-1], "he"]}, (f"'he' (id {LLAMA2_ID['he']})", "the same token twice")),
    ({"tokenizer.ggml.tokens": [*WORDS[:-1], "x" * 257]}, (f"token {TOKENS - 1}", "257 characters")),
    ({"tokenizer.ggml.model": "t5"}, ("'t5'", "SentencePiece ('llama')")),
])
def test_a_hostile_vocabulary_is_refused_in_one_line(tmp_path, changes, words):
    path = write_llama2_style(tmp_path / "bad.gguf", **changes)
    with pytest.raises(BringupError) as caught:
        gguf_tokenizer_data(open_gguf(path))
    assert_one_line(str(caught.value), path, *words)


@pytest.mark.parametrize(("cap", "words"), [("MAX_PIECES_CHARS", ("characters, more than the 100",)),
                                            ("MAX_MERGES", ("more than the 10 merges",))])
def test_the_pieces_and_their_merges_are_capped(tmp_path, monkeypatch, cap, words):
    """Every split of every piece is tried: a vocabulary past the caps is refused before that work (small caps
    here; the real ones are 2^22 characters and 2^20 merges)."""
    monkeypatch.setattr(sentencepiece, cap, 100 if cap == "MAX_PIECES_CHARS" else 10)
    path = write_llama2_style(tmp_path / "big.gguf")
    with pytest.raises(BringupError) as caught:
        gguf_tokenizer_data(open_gguf(path))
    assert_one_line(str(caught.value), path, *words)


def assert_one_line(message: str, path: Path, *words: str) -> None:
    assert "\n" not in message and message.startswith(str(path)), message
    for word in words:
        assert word in message, message
