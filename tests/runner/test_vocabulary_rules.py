"""The vocabulary rules (bringup/runner/text/vocabulary.py) and tokenizer.json's use of them, on small data: what is
refused and its words, and what a sound vocabulary of each kind keeps. The CLI cases are in
tests/cli/test_hostile_tokenizer_json.py (directories) and tests/cli/test_hostile_gguf.py (GGUF files)."""

from __future__ import annotations

import json

import pytest

from bringup.runner.text.tokenizer_json import check_tokenizer_document, keep_repeated_keys
from bringup.runner.text.vocabulary import (
    RepeatedEntry,
    VocabularyError,
    merge_pairs,
    token_list,
)

VOCAB = {"a": 0, "b": 1, "ab": 2, "é": 3, "#b": 4, "##": 5}


def vocabulary(ids: dict[str, int] = VOCAB):  # type: ignore[no-untyped-def]
    return token_list("v", list(ids), list(ids.values()))


def test_a_token_stated_again_with_its_id_is_one_entry() -> None:
    kept = token_list("v", ["a", "b", "a"], [0, 1, 0])
    assert kept.ids == {"a": 0, "b": 1} and kept.tokens == {0: "a", 1: "b"}


@pytest.mark.parametrize(("tokens", "ids", "words", "pair"), [
    (["a", "b", "a"], [0, 1, 2], "v holds 'a' (id 0) and 'a' (id 2), the same token twice", (0, 2)),
    (["a", "b", "c"], [0, 1, 1], "v holds 'b' (id 1) and 'c' (id 1), two tokens with one id", (1, 1)),
])
def test_a_token_or_an_id_twice_is_named(tokens: list[str], ids: list[int], words: str, pair: tuple) -> None:
    with pytest.raises(RepeatedEntry) as refused:
        token_list("v", tokens, ids)
    assert str(refused.value) == words and refused.value.ids == pair


def test_a_later_list_is_checked_against_the_earlier_one() -> None:
    base = vocabulary()
    assert token_list("added", ["a", "<x>"], [0, 9], earlier=(base,)).ids == {"a": 0, "<x>": 9}
    with pytest.raises(RepeatedEntry, match=r"v holds 'b' \(id 1\) and added holds '<x>' \(id 1\), two tokens"):
        token_list("added", ["<x>"], [1], earlier=(base,))
    with pytest.raises(RepeatedEntry, match=r"v holds 'a' \(id 0\) and added holds 'a' \(id 7\), the same token"):
        token_list("added", ["a"], [7], earlier=(base,))


@pytest.mark.parametrize("merges", [[["a", "b"]], ["a b"], []], ids=["pairs", "strings", "none"])
def test_merges_of_tokens_that_make_a_token_are_kept(merges: list) -> None:
    assert merge_pairs("m", merges, vocabulary()) == [("a", "b")] * len(merges)


def test_merges_mixing_both_forms_are_left_to_the_library() -> None:
    assert merge_pairs("m", ["a b", ["a", "b"]], vocabulary()) == [("a", "b"), ("a", "b")]


@pytest.mark.parametrize(("merges", "words"), [
    ([["a", "b"], ["a", "z"]], "merge 1 'a z' of m needs the token 'z', which is not in v"),
    ([["b", "a"]], "merge 0 'b a' of m needs the token 'ba', which is not in v"),
    (["a b", "a  b"], "merge 1 of m is 'a  b', not two tokens separated by one space"),
    ([["a", "b", "c"]], "merge 0 of m is a JSON list of 3 items, not a list of two strings"),
    ([["a", 1]], "merge 0 of m is a JSON list of 2 items, not a list of two strings"),
    ([7], "merge 0 of m is a JSON number, not a list of two strings"),
])
def test_a_merge_that_is_not_a_pair_of_tokens_making_a_token_is_named(merges: list, words: str) -> None:
    with pytest.raises(VocabularyError) as refused:
        merge_pairs("m", merges, vocabulary())
    assert str(refused.value) == words


def test_the_continuing_prefix_is_cut_off_the_second_part_as_the_library_cuts_it() -> None:
    assert merge_pairs("m", [["a", "#b"]], vocabulary(), "#") == [("a", "#b")]  # makes 'ab'
    assert merge_pairs("m", [["ab", "##"]], vocabulary(), "##") == [("ab", "##")]  # the whole part: makes 'ab'
    with pytest.raises(VocabularyError, match="needs the token 'a#b'"):
        merge_pairs("m", [["a", "#b"]], vocabulary())  # no prefix, nothing cut
    with pytest.raises(VocabularyError, match=r"merge 0 'a é' of m: .* cuts the first 1 bytes .* which splits a"):
        merge_pairs("m", [["a", "é"]], vocabulary(), "#")  # 'é' is two bytes: the cut lands inside it
    with pytest.raises(VocabularyError, match=r"cuts the first 3 bytes .*, which is not that long"):
        merge_pairs("m", [["a", "##"]], vocabulary(), "#é")


def document(**changes: object) -> dict:
    tok: dict = {"added_tokens": [{"id": 0, "content": "a", "special": True}],
                 "model": {"type": "BPE", "vocab": dict(VOCAB), "merges": [["a", "b"]]}}
    for where, value in changes.items():
        if where == "added_tokens":
            tok["added_tokens"] = value
        else:
            tok["model"][where] = value
    return tok


@pytest.mark.parametrize(("tok", "words"), [
    (document(vocab={"a": 0, "b": 1}), "merge 0 'a b' of model.merges needs the token 'ab', which is not in model"),
    (document(added_tokens=[{"id": 9, "content": "a"}]), "model.vocab holds 'a' (id 0) and added_tokens holds 'a'"),
    (document(added_tokens=[{"id": 9}]), "added_tokens[0] has the content null and the id 9; it needs a string"),
    (document(added_tokens={}), "added_tokens is a JSON object, not a list"),
    (document(vocab={"a": -1}), "model.vocab gives 'a' the id -1, not a non-negative integer"),
    (document(vocab={"a": True}), "model.vocab gives 'a' the id true, not a non-negative integer"),
    (document(vocab="a"), "model.vocab is a JSON string, not an object of token -> id or a list of"),
    (document(merges={}), "model.merges is a JSON object, not a list"),
    (document(continuing_subword_prefix=3), "model.continuing_subword_prefix is a JSON number, not a string"),
    ({"model": []}, "'model' is a JSON list of 0 items, not an object"),
    ([], "the file is a JSON list of 0 items, not an object"),
    ({"added_tokens": [], "model": {"type": "Unigram", "vocab": [["a", 0.0], ["a", -1.0]]}},
     "model.vocab holds 'a' (id 0) and 'a' (id 1), the same token twice"),
    ({"added_tokens": [], "model": {"type": "Unigram", "vocab": [["a", 0.0], [1, 0.0]]}},
     "model.vocab[1] is a JSON list of 2 items, not a [token, score] pair"),
    ({"added_tokens": [], "model": {"type": "WordLevel", "vocab": {"a": 0, "b": 0}}},
     "model.vocab holds 'a' (id 0) and 'b' (id 0), two tokens with one id"),
    ({"added_tokens": [], "model": {"vocab": {"a": 0}, "merges": [["a", "a"]]}},  # no type: the library reads BPE
     "needs the token 'aa'"),
])
def test_a_tokenizer_document_breaking_a_rule_is_named(tok: object, words: str) -> None:
    with pytest.raises(VocabularyError) as refused:
        check_tokenizer_document(tok)
    assert words in str(refused.value)


@pytest.mark.parametrize("tok", [
    document(),
    {"added_tokens": [], "model": {"type": "WordPiece", "vocab": {"a": 0, "##b": 1}, "merges": [["x", "y"]]}},
    {"added_tokens": [{"id": 2, "content": "<unk>"}], "model": {"type": "Unigram", "vocab": [["a", 0.0], ["b", 0.0]]}},
], ids=["bpe", "wordpiece (its merges unread)", "unigram"])
def test_a_sound_tokenizer_document_passes(tok: dict) -> None:
    assert check_tokenizer_document(tok) is None  # it raises on a broken rule


def test_a_key_written_twice_is_seen_with_every_value_it_had() -> None:
    text = '{"added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "a": 2}, "merges": []}}'
    with pytest.raises(RepeatedEntry, match=r"'a' \(id 0\) and 'a' \(id 2\), the same token twice"):
        check_tokenizer_document(json.loads(text, object_pairs_hook=keep_repeated_keys))
    again = json.loads(text.replace('"a": 2', '"a": 0'), object_pairs_hook=keep_repeated_keys)
    assert check_tokenizer_document(again) is None  # stated again with its id: one entry
