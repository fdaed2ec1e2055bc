"""Hostile GGUF files through the real CLI: each ends in one `error:` line naming the problem and exit 2, never a
traceback, within seconds and a few hundred MB.

Metadata that claims more than the file holds, or more than a cap (a 10^9-item array in a 436 KB file, a real 10^7
item array, a vocabulary past 2^20 tokens, 2 x 10^6 empty strings), is refused by the pre-scan
(runner/sources/gguf/prescan.py) before gguf's reader would have built gigabytes of objects; these run in a child
process so its peak RSS and Rust's own stderr are seen. Tensors outside the file or sharing bytes are refused by
name; a tokenizer the tokenizers library would reject (a merge of tokens the vocabulary lacks, a token twice) is
refused where the tokenizer is built, naming the merge or the token, by generate, selftest and eval alike."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from bringup.runner.sources.gguf.prescan import MAX_VOCABULARY
from tests.cli.child_cli import assert_one_error_line, measured_cli
from tests.cli.run_cli import run_cli
from tests.runner.gguf_bytes import ARRAY, STRING, UINT8, array, kv, write
from tests.runner.gguf_files import write_gguf
from tests.runner.test_gguf_refusals import tiny  # noqa: F401  (the module's small llama and its valid file)

gguf = pytest.importorskip("gguf", reason="writing GGUF files needs the gguf package")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")
PEAK_MB = 1000  # the CLI itself peaks near 330 MB (torch imported); before the pre-scan these reached 2-6 GB


def header_only(path: Path, *entries: bytes) -> Path:
    return write(path, [kv("general.architecture", STRING, "llama"), kv("tokenizer.ggml.model", STRING, "gpt2"),
                        *entries])


def claim_without_data(path: Path) -> Path:
    """436 KB, one uint8 array claiming 10^9 items."""
    return header_only(path, kv("general.junk", ARRAY, array(UINT8, 10**9, bytes(436_000))))


def real_array(path: Path) -> Path:
    """10 MB: a uint8 array with all its 10^7 items."""
    return header_only(path, kv("general.junk", ARRAY, array(UINT8, 10**7, bytes(10**7))))


def vocabulary_past_the_cap(path: Path) -> Path:
    """9 MB: 2^20 + 1 one-byte tokens, all there (a 10^7-token vocabulary is the same case, 90 MB)."""
    tokens = b"".join(struct.pack("<Q", 1) + bytes([33 + i % 94]) for i in range(MAX_VOCABULARY + 1))
    return header_only(path, kv("tokenizer.ggml.tokens", ARRAY, array(STRING, MAX_VOCABULARY + 1, tokens)))


def empty_strings(path: Path) -> Path:
    """16 MB: 2 x 10^6 empty tokens."""
    return header_only(path, kv("tokenizer.ggml.tokens", ARRAY, array(STRING, 2 * 10**6, bytes(16 * 10**6))))


def generate_args(tmp_path: Path, model: Path) -> list[str]:
    return ["generate", "Hi", "--model", str(model), "--device", "cpu", "--max-tokens", "2", "--profile",
            str(tmp_path / "p.yaml")]


@pytest.mark.parametrize(("build", "words"), [
    (claim_without_data, ("'general.junk' claims 1,000,000,000 items", "65,536")),
    (real_array, ("'general.junk' claims 10,000,000 items", "65,536")),
    (vocabulary_past_the_cap, ("'tokenizer.ggml.tokens' claims 1,048,577 items", "1,048,576")),
    (empty_strings, ("'tokenizer.ggml.tokens' claims 2,000,000 items", "1,048,576")),
])
def test_metadata_claiming_too_much_is_refused_within_seconds_and_bounded_memory(tmp_path, build, words):
    model = build(tmp_path / "hostile.gguf")
    done, peak_mb = measured_cli(tmp_path, generate_args(tmp_path, model))
    assert_one_error_line(done.returncode, done.stdout, done.stderr, str(model), *words, "refused before reading")
    assert peak_mb < PEAK_MB, f"peak RSS {peak_mb:.0f} MB"


def with_offsets(source: Path, target: Path, offset_of: dict[str, int]) -> Path:
    """A copy of `source` with the named tensors' offsets rewritten in its tensor index."""
    target.write_bytes(source.read_bytes())
    reader = gguf.GGUFReader(str(target), "r+")
    for tensor in reader.tensors:
        if tensor.name in offset_of or "*" in offset_of:
            tensor.field.parts[-1][0] = offset_of.get(tensor.name, offset_of.get("*"))
    reader.data.flush()
    del reader
    return target


def test_tensors_sharing_bytes_are_refused_naming_them(tmp_path, tiny):  # noqa: F811
    model = with_offsets(tiny[2], tmp_path / "overlap.gguf", {"*": 0})
    result = run_cli(generate_args(tmp_path, model))
    assert_one_error_line(result.code, result.stdout, result.stderr, "tensors 'token_embd.weight'",
                          "and 'blk.0.", "share bytes")


def test_an_offset_that_would_wrap_around_is_refused_in_the_pre_scan(tmp_path, tiny):  # noqa: F811
    model = with_offsets(tiny[2], tmp_path / "wrap.gguf", {"blk.1.ffn_up.weight": 2**64 - 64})
    result = run_cli(generate_args(tmp_path, model))
    assert_one_error_line(result.code, result.stdout, result.stderr, "'blk.1.ffn_up.weight' ends at byte 1844674407",
                          "truncated or corrupt")


VOCABULARIES = {  # (tokens, merges) as the test tokenizer has them -> a broken vocabulary, and the words refusing it
    "a merge of a token the vocabulary lacks": (lambda t, m: (t, ["zzq zzw", *m]),
                                                ("merge 0 'zzq zzw'", "needs the token 'zzq'")),
    "a merge whose result the vocabulary lacks": (lambda t, m: ([("QQQ" if x == "hello" else x) for x in t], m),
                                                  ("'he llo'", "needs the token 'hello'")),
    "a merge whose result is longer than every token": (lambda t, m: (t, [*m, "hello hello"]),  # the library panics
                                                        ("'hello hello'", "needs the token 'hellohello'")),
    "a token twice": (lambda t, m: ([*t[:4], t[5], *t[5:]], m), ("'$' (id 4) and '$' (id 5)", "the same token twice")),
}


@pytest.fixture(scope="module", params=list(VOCABULARIES))
def broken_vocabulary(request, tiny, tmp_path_factory):  # noqa: F811
    hf, tokenizer, _ = tiny
    edit, words = VOCABULARIES[request.param]
    path = tmp_path_factory.mktemp("vocabulary") / "broken.gguf"
    return write_gguf(path, hf, tokenizer, "llama", vocabulary=edit), words


@pytest.mark.parametrize("command", [["generate", "Hi", "--max-tokens", "2"], ["selftest", "--steps", "2"],
                                     ["eval", "--ctx", "64"]])
def test_a_broken_vocabulary_is_one_line_in_generate_selftest_and_eval(tmp_path, broken_vocabulary, command):
    model, words = broken_vocabulary
    result = run_cli([*command, "--model", str(model), "--device", "cpu", "--profile", str(tmp_path / "p.yaml")])
    assert_one_error_line(result.code, result.stdout, result.stderr, str(model), *words, "re-convert it")


def test_a_merge_the_tokenizers_library_would_panic_on_prints_nothing_but_the_line(tmp_path, tiny):  # noqa: F811
    """Unchecked, the tokenizers library panics here: a PanicException that `except Exception` lets through, after
    Rust printed about 200 lines to the process's stderr (past run_cli's capture, so this runs in a child)."""
    hf, tokenizer, _ = tiny
    edit, words = VOCABULARIES["a merge whose result is longer than every token"]
    model = write_gguf(tmp_path / "panics.gguf", hf, tokenizer, "llama", vocabulary=edit)
    done, _ = measured_cli(tmp_path, generate_args(tmp_path, model))
    assert_one_error_line(done.returncode, done.stdout, done.stderr, str(model), *words)
