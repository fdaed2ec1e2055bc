"""The rules a tokenizer's vocabulary and BPE merges keep before the tokenizers library is given them, written once
for every source of a tokenizer (a model directory's tokenizer.json, a GGUF file's metadata).

- Each token has one id and each id one token, within a list and across lists (a model's vocabulary and its added
  tokens); the same token with the same id stated again is one entry. The library keeps one of two and leaves the
  other a hole that no text encodes to, or quietly gives a token an id its file never named.
- Each merge is a pair of tokens of the vocabulary, and so is what it makes: the first part followed by the second,
  less as many leading bytes as `continuing_subword_prefix` has (the library's rule). The library raises on a
  missing part, panics on a missing result (a PanicException that `except Exception` lets through, after Rust
  printed its backtrace to the process's stderr) and aborts the process when that cut splits a character.

Each check is a few passes of built-in operations over its entries (dictionaries, sets, `map`), so a 2^20-token
vocabulary with its merges takes about a second; only a list that breaks a rule is walked entry by entry, to name
the first entry that does. A broken rule raises VocabularyError, a phrase naming the entries (each cut to 60
characters); the caller adds which file and what to do.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import add, itemgetter

from bringup.terminal_text import quoted

Pair = tuple[str, str]


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
    ids: dict[str, int]
    tokens: dict[int, str]


def token_list(name: str, tokens: Sequence[str], ids: Sequence[int], earlier: Sequence[TokenList] = ()) -> TokenList:
    """The list `name` of `tokens[i]` with id `ids[i]`; RepeatedEntry naming both entries when a token has a second
    id or an id a second token, in this list or against an `earlier` one."""
    this = TokenList(name, dict(zip(tokens, ids)), dict(zip(ids, tokens)))
    if len(this.ids) < len(tokens) or len(this.tokens) < len(tokens) or \
            any(_disagree(known, this) for known in earlier):
        _find_repeat(name, zip(tokens, ids), earlier)  # raises, unless each repeat is an entry stated again
    return this


def merge_pairs(name: str, merges: Sequence[object], vocabulary: TokenList, continuing_prefix: str = "") -> list[Pair]:
    """Each merge of the list `name` (a string "first second", or a list of the two) as a pair, once checked that
    its parts and what it makes are tokens of `vocabulary`; VocabularyError naming the first merge that is not."""
    cut = len(continuing_prefix.encode("utf-8"))
    pairs = _pairs_if_all_hold(merges, vocabulary.ids, cut)
    if pairs is not None:
        return pairs
    return [_checked_merge(name, index, merge, vocabulary, continuing_prefix, cut)
            for index, merge in enumerate(merges)]


def _disagree(known: TokenList, this: TokenList) -> bool:
    """Whether a token of both lists has two ids, or an id of both two tokens."""
    return any(known.ids[token] != this.ids[token] for token in known.ids.keys() & this.ids.keys()) or \
        any(known.tokens[i] != this.tokens[i] for i in known.tokens.keys() & this.tokens.keys())


def _find_repeat(name: str, entries: Iterable[tuple[str, int]], earlier: Sequence[TokenList]) -> None:
    """The entries walked in order: RepeatedEntry at the first token given a second id or id given a second token."""
    this = TokenList(name, {}, {})
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


def _pairs_if_all_hold(merges: Sequence[object], ids: dict[str, int], cut: int) -> list[Pair] | None:
    """The merges as pairs when all are well formed and every part and result is a token; None when one is not
    (or the merges mix both forms), to be walked one by one."""
    kinds = set(map(type, merges))
    if kinds not in ({str}, {list}):
        return [] if not merges else None
    parts = [merge.split(" ") for merge in merges] if kinds == {str} else merges
    if set(map(len, parts)) != {2}:
        return None
    firsts, seconds = list(map(itemgetter(0), parts)), list(map(itemgetter(1), parts))
    if set(map(type, firsts)) | set(map(type, seconds)) != {str}:
        return None
    rests = [_after(second, cut) for second in seconds] if cut else seconds
    if cut and None in rests:
        return None
    known = ids.__contains__
    if not (all(map(known, firsts)) and all(map(known, seconds)) and all(map(known, map(add, firsts, rests)))):
        return None
    return list(zip(firsts, seconds))


def _checked_merge(name: str, index: int, merge: object, vocabulary: TokenList, prefix: str, cut: int) -> Pair:
    """One merge as a pair; VocabularyError naming it when it is not a pair of tokens that makes a token."""
    pair = _pair(merge)
    if pair is None:
        form = "two tokens separated by one space" if isinstance(merge, str) else "a list of two strings"
        raise VocabularyError(f"merge {index} of {name} is {_described(merge)}, not {form}")
    first, second = pair
    rest = _after(second, cut)
    if rest is None:
        why = "splits a character" if len(second.encode("utf-8")) > cut else "is not that long"
        raise VocabularyError(f"{_merge(index, pair, name)}: the tokenizers library cuts the first {cut} bytes (the "
                              f"length of continuing_subword_prefix {quoted(prefix)}) off its second part, which "
                              f"{why}")
    ids = vocabulary.ids
    if first not in ids or second not in ids or first + rest not in ids:
        missing = next(token for token in (first, second, first + rest) if token not in ids)
        raise VocabularyError(f"{_merge(index, pair, name)} needs the token {quoted(missing)}, which is not in "
                              f"{vocabulary.name}")
    return pair


def _merge(index: int, pair: Pair, name: str) -> str:
    return f"merge {index} {quoted(pair[0] + ' ' + pair[1])} of {name}"


def _pair(merge: object) -> Pair | None:
    """A merge as the library reads it: a string with exactly one space between its two tokens, or a list of two
    strings."""
    parts = merge.split(" ") if isinstance(merge, str) else merge
    if isinstance(parts, list) and len(parts) == 2 and isinstance(parts[0], str) and isinstance(parts[1], str):
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
    return quoted(value) if isinstance(value, str) else json_kind(value)


def json_kind(value: object) -> str:
    """What a JSON value is, in a few words (never the value itself, which may be long)."""
    if isinstance(value, list):
        return f"a JSON list of {len(value)} items"
    kinds = {dict: "object", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else f"a JSON {kinds.get(type(value), type(value).__name__)}"


def _repeated(first_list: str, first_token: str, first_id: int, second_list: str, second_token: str,
              second_id: int, what: str) -> RepeatedEntry:
    second = "" if second_list == first_list else f"{second_list} holds "
    return RepeatedEntry(f"{first_list} holds {quoted(first_token)} (id {first_id}) and {second}"
                         f"{quoted(second_token)} (id {second_id}), {what}", (first_id, second_id))
