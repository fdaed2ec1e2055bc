"""A model directory's tokenizer.json that the tokenizers library would mishandle, through the real CLI: each ends
in one `error:` line naming the entry, exit 2, from generate, selftest and eval alike.

Unchecked, a merge whose result is not a token makes the library panic (about 200 lines of Rust backtrace on the
process's stderr, then a PanicException that `except Exception` lets through), and a continuing_subword_prefix cut
that splits a character aborts the process; those two run in a child process, where that output would be seen.
A token twice or an id twice the library took silently, leaving a hole or renumbering a token. The rules live in
bringup/runner/text/vocabulary.py (shared with GGUF files), applied where tokenizer.json is read (tokenizer_json.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import test_hostile_inputs
from tests.cli.child_cli import assert_one_error_line, measured_cli
from tests.cli.run_cli import run_cli
from tests.cli.test_hostile_inputs import copied

good_model = test_hostile_inputs.good_model  # the fixture: one small random Llama directory per module
COMMANDS = {"generate": ["generate", "Hi", "--max-tokens", "2"], "selftest": ["selftest", "--steps", "2"],
            "eval": ["eval", "--ctx", "64"]}
PEAK_MB = 1000  # the CLI itself peaks near 330 MB (torch imported)
Edit = Callable[[dict], None]  # changes the parsed tokenizer.json in place


def longest_token_twice(tok: dict) -> None:
    """The merge the library panics on: both parts are tokens, what they make is longer than every token."""
    longest = max(tok["model"]["vocab"], key=len)
    tok["model"]["merges"].append([longest, longest])


def prefix_splitting_a_character(tok: dict) -> None:
    """The merge the library aborts the process on: cutting the one-byte prefix's length off 'Ġ' (two bytes in
    UTF-8) leaves half a character."""
    tok["model"]["continuing_subword_prefix"] = "#"
    tok["model"]["merges"].insert(0, ["Ġ", "Ġ"])


def first_merge(first: str, second: str) -> Edit:
    return lambda tok: tok["model"]["merges"].insert(0, [first, second])


def vocab_entry(token: str, token_id: int) -> Edit:
    return lambda tok: tok["model"]["vocab"].update({token: token_id})


def added_token(content: str, token_id: int) -> Edit:
    return lambda tok: tok["added_tokens"].append({**tok["added_tokens"][0], "content": content, "id": token_id})


def string_merges(tok: dict) -> None:
    """The merges written as "first second" strings, as older files have them."""
    tok["model"]["merges"] = [" ".join(pair) for pair in tok["model"]["merges"]]


def string_merges_one_of_three_parts(tok: dict) -> None:
    string_merges(tok)
    tok["model"]["merges"].append("h e l")


CASES: dict[str, tuple[Edit, tuple[str, ...]]] = {
    "a merge whose result is longer than every token": (longest_token_twice, ("model.merges", "needs the token")),
    "a merge cut inside a character by continuing_subword_prefix": (
        prefix_splitting_a_character,
        ("merge 0 'Ġ Ġ' of model.merges", "cuts the first 1 bytes", "splits a character")),
    "a merge of a token the vocabulary lacks": (first_merge("zzq", "zzw"),
                                                ("merge 0 'zzq zzw'", "needs the token 'zzq'", "not in model.vocab")),
    "a merge whose result the vocabulary lacks": (first_merge("h", "!"), ("merge 0 'h !'", "needs the token 'h!'")),
    "a merge string of three parts": (string_merges_one_of_three_parts,
                                      ("is 'h e l', not two tokens separated by one space",)),
    "two tokens with one id": (vocab_entry("zzz", 5), ("model.vocab holds", "'zzz' (id 5), two tokens with one id")),
    "an added token restating a vocabulary token with another id": (
        added_token("<s>", 400), ("model.vocab holds '<s>' (id 0) and added_tokens holds '<s>' (id 400)",
                                  "the same token twice")),
    "an added token given a vocabulary token's id": (
        added_token("<x>", 5), ("and added_tokens holds '<x>' (id 5), two tokens with one id",)),
    "two added tokens with one id": (lambda tok: (added_token("<x>", 400)(tok), added_token("<y>", 400)(tok)),
                                     ("added_tokens holds '<x>' (id 400) and '<y>' (id 400)",)),
    "a vocabulary id that is not an integer": (vocab_entry("zzz", 5.0),  # type: ignore[arg-type]
                                               ("model.vocab gives 'zzz' the id 5.0, not a non-negative integer",)),
}
IN_CHILD = ("a merge whose result is longer than every token", "a merge cut inside a character by "
            "continuing_subword_prefix")


def broken(tmp_path: Path, good: Path, edit: Edit) -> Path:
    model = copied(tmp_path, good)
    path = model / "tokenizer.json"
    tok = json.loads(path.read_text())
    edit(tok)
    path.write_text(json.dumps(tok))
    return model


def args(command: str, model: Path, tmp_path: Path) -> list[str]:
    return [*COMMANDS[command], "--model", str(model), "--device", "cpu", "--profile", str(tmp_path / "p.yaml")]


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_a_broken_tokenizer_json_is_one_line(tmp_path: Path, good_model: Path, case: str, command: str) -> None:
    edit, words = CASES[case]
    model = broken(tmp_path, good_model, edit)
    if case in IN_CHILD:  # a panic's backtrace shows only at the descriptor; an abort would end pytest itself
        done, peak_mb = measured_cli(tmp_path, args(command, model, tmp_path))
        assert_one_error_line(done.returncode, done.stdout, done.stderr, "tokenizer.json:", *words, "re-download it")
        assert peak_mb < PEAK_MB, f"peak RSS {peak_mb:.0f} MB"
        return
    result = run_cli(args(command, model, tmp_path))
    assert_one_error_line(result.code, result.stdout, result.stderr, "tokenizer.json:", *words, "re-download it")


def test_a_token_written_twice_in_the_vocabulary_object_is_seen(tmp_path: Path, good_model: Path) -> None:
    """JSON parsers keep only the last value of a key given twice (the library does too, leaving the first id a
    hole), so the file is checked as written."""
    model = copied(tmp_path, good_model)
    path = model / "tokenizer.json"
    text = path.read_text()
    written = json.loads(text)["model"]["vocab"]["#"]
    path.write_text(text.replace('"vocab": {', f'"vocab": {{"#": {written + 3}, ', 1))  # read as '#': written
    result = run_cli(args("generate", model, tmp_path))
    assert_one_error_line(result.code, result.stdout, result.stderr,
                          f"model.vocab holds '#' (id {written + 3}) and '#' (id {written}), the same token twice")


def test_names_are_cut_to_sixty_characters(tmp_path: Path, good_model: Path) -> None:
    long = "x" * 500
    model = broken(tmp_path, good_model, first_merge(long, "y"))
    result = run_cli(args("generate", model, tmp_path))
    assert_one_error_line(result.code, result.stdout, result.stderr, f"merge 0 '{'x' * 57}...' of model.merges")
    assert long not in result.stderr


@pytest.mark.parametrize("edit", [lambda tok: None, string_merges, added_token("<s>", 0)],
                         ids=["as saved", "merges as strings", "an added token restating its vocabulary entry"])
def test_a_sound_tokenizer_json_still_generates(tmp_path: Path, good_model: Path, edit: Edit) -> None:
    model = broken(tmp_path, good_model, edit)
    result = run_cli([*args("generate", model, tmp_path), "--json"])
    assert result.code == 0, result.stderr
    assert json.loads(result.stdout)["completion_tokens"] == 2
