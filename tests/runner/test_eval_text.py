"""Eval texts from outside: binary, invalid UTF-8, empty, not a regular file, one 100 MB line. Each is refused in one
line or scored; a long text cut by --max-tokens is tokenized only as far as the tokens it needs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bringup.errors import BringupError
from bringup.runner.eval.run import SLACK_TOKENS, leading_tokens
from bringup.runner.eval.text import read_text


@pytest.mark.parametrize("content, words", [
    (bytes(range(256)) * 64, r"not UTF-8 \(byte 128\)"),
    (b"caf\xc3", r"not UTF-8 \(byte 3\)"),
    (b"", "is empty"),
    (b" \n\t\n", "is empty"),
])
def test_a_text_that_cannot_be_scored_is_refused_in_one_line(tmp_path, content, words) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(content)
    with pytest.raises(BringupError, match=words) as caught:
        read_text(path)
    assert "\n" not in str(caught.value) and "--text" in str(caught.value)


@pytest.mark.parametrize("target, words", [
    ("{tmp}", "is a directory, not a regular file"),
    ("{tmp}/fifo", "is a FIFO, not a regular file"),
    ("/proc/self/mem", "a file of the kernel"),
    ("/dev/zero", "a character device"),
    ("{tmp}/absent.txt", "does not exist"),
])
def test_a_text_path_that_is_no_regular_file_is_refused_in_one_line(tmp_path, target, words) -> None:
    os.mkfifo(tmp_path / "fifo")
    path = Path(target.format(tmp=tmp_path))
    if "absent" not in target and not os.path.exists(path):
        pytest.skip(f"{path} does not exist on this system")
    with pytest.raises(BringupError, match=words) as caught:
        read_text(path)
    assert "\n" not in str(caught.value) and "Errno" not in str(caught.value)


def test_binary_that_is_utf8_is_text() -> None:
    text = "".join(map(chr, range(128))) * 4
    path = Path("binary.txt")
    path.write_text(text, encoding="utf-8")
    assert read_text(path).text == text


def test_one_100_mb_line_cut_by_max_tokens_is_tokenized_only_as_far_as_needed() -> None:
    line = ("abcdefgh" * 12_500_000)
    seen: list[int] = []

    def encode(part: str) -> list[int]:  # the built-in model's byte tokenizer: one id per UTF-8 byte
        seen.append(len(part))
        return list(part.encode("utf-8"))

    assert leading_tokens(encode, line, 64) == list(line[:64].encode())
    assert max(seen) < 64 * 1024 and max(seen) >= 64 + SLACK_TOKENS
    assert leading_tokens(encode, "short text", 64) == list(b"short text")
    assert len(leading_tokens(encode, "x" * 1000, None)) == 1000


def test_a_prefix_too_short_for_its_tokens_grows_until_it_gives_them() -> None:
    def encode(part: str) -> list[int]:  # 100 characters a token: a prefix of 16 per token gives too few
        return [len(part[i:i + 100]) for i in range(0, len(part), 100)]

    assert len(leading_tokens(encode, "y" * 10**6, 50)) == 50
