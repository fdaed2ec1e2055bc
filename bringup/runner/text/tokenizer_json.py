"""A model directory's tokenizer.json, read through model_files' jail and checked by the vocabulary rules
(vocabulary.py) before the tokenizers library is given it, so a file the library would mishandle, panic on or abort
on is one line naming the entry.

What is checked, and the shapes the checks need (a wrong one is refused naming the field):
- `model.vocab`: an object token -> id (BPE, WordPiece, WordLevel) or a list of [token, score] (Unigram, whose
  ids are the positions); a key written twice in the object is seen, though JSON parsers (and the library) keep
  only its last value;
- `added_tokens`: objects with a string `content` and an integer `id`, checked against `model.vocab` and each
  other;
- `model.merges` of a BPE model: each "first second" or [first, second], with `continuing_subword_prefix` a string
  or null.
The rest of the file is the library's to judge (it raises an ordinary exception on what it cannot read).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.runner.model_files import MAX_TOKENIZER_BYTES, read_json_text
from bringup.runner.text.vocabulary import TokenList, VocabularyError, json_kind, merge_pairs, token_list
from bringup.terminal_text import quoted, shown

NAME = "tokenizer.json"


class RepeatedKeys(dict):
    """A JSON object that was given a key more than once: the values JSON keeps (the last), and all its pairs."""

    pairs: list[tuple[str, Any]]


def read_tokenizer_json(model_dir: Path) -> str:
    """The text of the model directory's tokenizer.json, once its vocabulary, added tokens and merges keep the
    vocabulary rules; BringupError naming the file and the entry when they do not."""
    text, document = read_json_text(model_dir, NAME, MAX_TOKENIZER_BYTES, pairs_hook=keep_repeated_keys)
    try:
        check_tokenizer_document(document)
    except VocabularyError as exc:
        raise BringupError(f"{shown(model_dir / NAME)}: {exc}; the tokenizer is corrupt: re-download it, or save "
                           "it again with the tokenizers library") from None
    return text


def check_tokenizer_document(document: Any) -> None:
    """VocabularyError (a phrase naming the field or the entry) when the parsed tokenizer.json breaks a rule."""
    if not isinstance(document, dict):
        raise VocabularyError(f"the file is {json_kind(document)}, not an object")
    model = document.get("model")
    if not isinstance(model, dict):
        raise VocabularyError(f"'model' is {json_kind(model)}, not an object")
    vocabulary = token_list("model.vocab", *_vocab_columns(model.get("vocab")))
    token_list("added_tokens", *_added_columns(document.get("added_tokens", [])), earlier=(vocabulary,))
    if model.get("type", "BPE" if "merges" in model else None) == "BPE":
        _check_merges(model, vocabulary)


def _check_merges(model: dict, vocabulary: TokenList) -> None:
    merges, prefix = model.get("merges", []), model.get("continuing_subword_prefix")
    if not isinstance(merges, list):
        raise VocabularyError(f"model.merges is {json_kind(merges)}, not a list")
    if prefix is not None and not isinstance(prefix, str):
        raise VocabularyError(f"model.continuing_subword_prefix is {json_kind(prefix)}, not a string or null")
    merge_pairs("model.merges", merges, vocabulary, prefix or "")


def _vocab_columns(vocab: Any) -> tuple[Sequence[str], Sequence[int]]:
    """model.vocab as its tokens and their ids (every pair of an object that repeats a key; a Unigram list's
    positions as ids)."""
    if vocab is None:
        return [], []
    if isinstance(vocab, list):
        if set(map(type, vocab)) - {list} or set(map(len, vocab)) - {2} or \
                set(map(type, tokens := list(map(itemgetter(0), vocab)))) - {str}:
            position = next(i for i, entry in enumerate(vocab) if not _is_unigram_entry(entry))
            raise VocabularyError(f"model.vocab[{position}] is {_shown_value(vocab[position])}, not a "
                                  "[token, score] pair")
        return tokens, range(len(vocab))
    if not isinstance(vocab, dict):
        raise VocabularyError(f"model.vocab is {json_kind(vocab)}, not an object of token -> id or a list of "
                              "[token, score] pairs")
    pairs = vocab.pairs if isinstance(vocab, RepeatedKeys) else vocab.items()
    tokens, ids = list(map(itemgetter(0), pairs)), list(map(itemgetter(1), pairs))
    if set(map(type, ids)) - {int} or min(ids, default=0) < 0:
        position = next(i for i, token_id in enumerate(ids) if type(token_id) is not int or token_id < 0)
        raise VocabularyError(f"model.vocab gives {quoted(tokens[position])} the id {_shown_value(ids[position])}, "
                              "not a non-negative integer")
    return tokens, ids


def _added_columns(added: Any) -> tuple[list[str], list[int]]:
    """added_tokens as their contents and their ids."""
    if not isinstance(added, list):
        raise VocabularyError(f"added_tokens is {json_kind(added)}, not a list")
    tokens, ids = [], []
    for position, entry in enumerate(added):
        if not isinstance(entry, dict):
            raise VocabularyError(f"added_tokens[{position}] is {json_kind(entry)}, not an object")
        content, token_id = entry.get("content"), entry.get("id")
        if not isinstance(content, str) or type(token_id) is not int or token_id < 0:
            raise VocabularyError(f"added_tokens[{position}] has the content {_shown_value(content)} and the id "
                                  f"{_shown_value(token_id)}; it needs a string content and a non-negative "
                                  "integer id")
        tokens.append(content)
        ids.append(token_id)
    return tokens, ids


def _is_unigram_entry(entry: Any) -> bool:
    return isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)


def keep_repeated_keys(pairs: list[tuple[str, Any]]) -> dict:
    """json.loads' object_pairs_hook: a dict, or a RepeatedKeys keeping every pair when a key came twice."""
    built = dict(pairs)
    if len(built) == len(pairs):
        return built
    repeated = RepeatedKeys(built)
    repeated.pairs = pairs
    return repeated


def _shown_value(value: Any) -> str:
    """A value from the file as an error line shows it: a string quoted (cut to 60 characters), another scalar as
    JSON writes it, a list or an object by its kind."""
    if isinstance(value, (list, dict)):
        return json_kind(value)
    return quoted(value) if isinstance(value, str) else shown(json.dumps(value))[:60]
