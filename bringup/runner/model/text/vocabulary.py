"""The rules a tokenizer's vocabulary and BPE merges keep before the tokenizers library is given them, written once
for every source of a tokenizer (a model directory's tokenizer.json, a GGUF file's metadata).

- Each token has one id and each id one token, within a list and across lists (a model's vocabulary and its added
  tokens); the same token with the same id stated again is one entry. The library keeps one of two and leaves the
  other a hole that no text encodes to, or quietly gives a token an id its file never named.
- Each merge is a pair of tokens of the vocabulary, and so is what it makes: the first part followed by the second,
  less the first bytes the length of `continuing_subword_prefix` (the library's rule). The library raises on a
  missing part, panics on a missing result (a PanicException that `except Exception` lets through, after Rust
  printed its backtrace to the process's stderr) and aborts the process when that cut splits a character.

Each check is one pass over its entries with dictionary look-ups: about a second for a 2^20-token vocabulary.
A broken rule raises VocabularyError, a phrase naming the entries (each cut to 60 characters); the caller adds
which file and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from bringup.terminal_text import quoted


class VocabularyError(ValueError):
    """A vocabulary or merge list the tokenizers library would mishandle; the message is a phrase naming it."""


class RepeatedEntry(VocabularyError):
    """A token with two ids, or an id with two tokens; `ids` are the two ids (equal when one id has two tokens)."""

    def __init__(self, phrase: str, ids: tuple[int, int]) -> None:
        super().__init__(phrase)
        self.ids = ids


@dataclass(frozen=True)
class TokenList:
    """One list of a vocabulary ("model.vocab", "added_tokens", "tokenizer.ggml.tokens"): token -> id, id -> token."""

    name: str
    ids: dict[str, int] = field(default_factory=dict)
    tokens: dict[int, str] = field(default_factory=dict)


def token_list(name: str, entries: Iterable[tuple[str, int]], earlier: Sequence[TokenList] = ()) -> TokenList:
    """The (token, id) `entries` of the list `name`; RepeatedEntry naming both entries when a token has a second id
    or an id a second token, in this list or against an `earlier` one."""
    this = TokenList(name)
    lists = (*earlier, this)
    for token, token_id in entries:
        for known in lists:
            first_id, first_token = known.ids.get(token, token_id), known.tokens.get(token_id, token)
            if first_id != token_id:
                raise _repeated(known.name, token, first_id, name, token, token_id, "the same token twice")
            if first_token != token:
                raise _repeated(known.name, first_token, token_id, name, token, token_id, "two tokens with one id")
        this.ids[token] = token_id
        this.tokens[token_id] = token
    return this


def merge_pairs(name: str, merges: Iterable[object], vocabulary: TokenList,
                continuing_prefix: str = "") -> Iterator[tuple[str, str]]:
    """Each merge of the list `name` (a string "first second", or a list of the two) as a pair, once checked that
    its parts and what it makes are tokens of `vocabulary`; VocabularyError naming the first merge that is not."""
    cut, ids = len(continuing_prefix.encode("utf-8")), vocabulary.ids
    for index, merge in enumerate(merges):
        pair = _pair(merge)
        if pair is None:
            form = "two tokens separated by one space" if isinstance(merge, str) else "a list of two strings"
            raise VocabularyError(f"merge {index} of {name} is {_described(merge)}, not {form}")
        first, second = pair
        rest = _after(second, cut)
        if rest is None:
            why = "splits a character" if len(second.encode("utf-8")) > cut else "is not that long"
            raise VocabularyError(f"{_merge(index, pair, name)}: the tokenizers library cuts the first {cut} bytes "
                                  f"(the length of continuing_subword_prefix {quoted(continuing_prefix)}) off its "
                                  f"second part, which {why}")
        made = first + rest
        if first not in ids or second not in ids or made not in ids:
            missing = next(t for t in (first, second, made) if t not in ids)
            raise VocabularyError(f"{_merge(index, pair, name)} needs the token {quoted(missing)}, which is not in "
                                  f"{vocabulary.name}")
        yield pair


def _merge(index: int, pair: tuple[str, str], name: str) -> str:
    return f"merge {index} {quoted(pair[0] + ' ' + pair[1])} of {name}"


def _pair(merge: object) -> tuple[str, str] | None:
    """A merge as the library reads it: a string with exactly one space between its two tokens, or a list of two
    strings."""
    parts = merge.split(" ") if isinstance(merge, str) else merge
    if isinstance(parts, list) and len(parts) == 2 and all(isinstance(part, str) for part in parts):
        return parts[0], parts[1]
    return None


def _after(token: str, cut: int) -> str | None:
    """`token` less its first `cut` bytes; None when it is shorter or the cut splits a character."""
    if not cut:
        return token
    raw = token.encode("utf-8")
    if len(raw) < cut:
        return None
    try:
        return raw[cut:].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _described(value: object) -> str:
    if isinstance(value, str):
        return quoted(value)
    if isinstance(value, list):
        return f"a JSON list of {len(value)} items"
    return f"a JSON {type(value).__name__}"


def _repeated(first_list: str, first_token: str, first_id: int, second_list: str, second_token: str,
              second_id: int, what: str) -> RepeatedEntry:
    second = "" if second_list == first_list else f"{second_list} holds "
    return RepeatedEntry(f"{first_list} holds {quoted(first_token)} (id {first_id}) and {second}"
                         f"{quoted(second_token)} (id {second_id}), {what}", (first_id, second_id))
