"""A SentencePiece vocabulary (`tokenizer.ggml.model` "llama": Llama 2, Mistral v1, Gemma) as a tokenizers-library
tokenizer that splits text as llama.cpp does.

llama.cpp joins adjacent pieces into any token of the vocabulary, the best-scored join first, and writes a character
no token covers as its byte tokens `<0xNN>`. That is BPE whose merges are every split of a token into two tokens,
ranked by the token's score (`tokenizer.ggml.scores`; of equal scores, the earlier token first), with byte fallback:
the model built here. Spaces become ▁ and, when `tokenizer.ggml.add_space_prefix` says so (llama.cpp's default for
this vocabulary), one ▁ goes before the text and after each token matched whole in it. Decoding turns ▁ back into
spaces, joins byte tokens into UTF-8 and strips that prefix space. The tokens matched whole in the text (unknown,
control and user-defined ones) are added by the caller (tokenizer.py), and never made by merges.
"""

from __future__ import annotations

import math
from itertools import islice
from typing import Any

from bringup.errors import BringupError
from bringup.runner.sources.gguf import metadata
from bringup.runner.sources.gguf.prescan import MAX_VOCABULARY
from bringup.runner.sources.gguf.reader import GGUFFile
from bringup.runner.text.vocabulary import TokenList
from bringup.terminal_text import quoted

SPACE = "\u2581"  # SentencePiece's ▁
SCORES_KEY, SPACE_PREFIX_KEY = "tokenizer.ggml.scores", "tokenizer.ggml.add_space_prefix"
# Every split of every piece (a token merges make) is tried, so pieces are capped: each at most 256 characters
# (SentencePiece trains pieces of up to 16 by default), all together at most 2^22 (Gemma 3's hold 1.4 M); and the
# merges they give at the 2^20 a file's tokenizer.ggml.merges may hold (Gemma 3's give 513,511).
MAX_PIECE_CHARS, MAX_PIECES_CHARS, MAX_MERGES = 256, 2**22, MAX_VOCABULARY


def sentencepiece_tokenizer(file: GGUFFile, tokens: list[str], vocabulary: TokenList, pieces: list[int],
                            unknown: int | None) -> Any:
    """The tokenizers-library Tokenizer of a SentencePiece vocabulary (`vocabulary` already checked; `pieces` the
    ids of the tokens merges make, the others matched whole), without its added tokens and post-processor."""
    from tokenizers import Tokenizer, decoders, models, normalizers

    merges = _merges(file, tokens, vocabulary, pieces, _scores(file, tokens))
    tok = Tokenizer(models.BPE(vocab=vocabulary.ids, merges=merges, byte_fallback=True, fuse_unk=True,
                               unk_token=None if unknown is None else tokens[unknown]))
    spaces = normalizers.Replace(" ", SPACE)
    readable = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if metadata.flag(file, SPACE_PREFIX_KEY, True):
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), spaces])
        tok.decoder = decoders.Sequence([*readable, decoders.Strip(" ", 1, 0)])
    else:
        tok.normalizer = spaces
        tok.decoder = decoders.Sequence(readable)
    return tok


def _scores(file: GGUFFile, tokens: list[str]) -> list[float]:
    scores = metadata.numbers(file, SCORES_KEY)
    if len(scores) != len(tokens):
        raise BringupError(f"{file.path}: {SCORES_KEY} has {len(scores)} entries for {len(tokens)} tokens; the file "
                           "is corrupt: re-convert it")
    if not all(map(math.isfinite, scores)):
        at = next(i for i, score in enumerate(scores) if not math.isfinite(score))
        raise BringupError(f"{file.path}: {SCORES_KEY} gives token {at} ({quoted(tokens[at])}) the score "
                           f"{scores[at]}; the file is corrupt: re-convert it")
    return scores


def _merges(file: GGUFFile, tokens: list[str], vocabulary: TokenList, pieces: list[int],
            scores: list[float]) -> list[tuple[str, str]]:
    """Each split of a piece into two tokens, the best-scored piece's first, each piece's splits left to right."""
    _check_lengths(file, tokens, pieces)
    known = vocabulary.ids
    ranked = (tokens[i] for i in sorted(pieces, key=lambda i: (-scores[i], i)))
    splits = ((left, right) for piece in ranked for cut in range(1, len(piece))
              if (left := piece[:cut]) in known and (right := piece[cut:]) in known)
    merges = list(islice(splits, MAX_MERGES + 1))
    if len(merges) > MAX_MERGES:
        raise BringupError(f"{file.path}: the pieces of tokenizer.ggml.tokens split into more than the {MAX_MERGES:,} "
                           "merges bringup builds (the most tokenizer.ggml.merges may hold); the file is corrupt: "
                           "re-convert it")
    return merges


def _check_lengths(file: GGUFFile, tokens: list[str], pieces: list[int]) -> None:
    lengths = [len(tokens[i]) for i in pieces]
    if lengths and max(lengths) > MAX_PIECE_CHARS:
        at = pieces[lengths.index(max(lengths))]
        raise BringupError(f"{file.path}: token {at} of tokenizer.ggml.tokens is {len(tokens[at])} characters, "
                           f"more than the {MAX_PIECE_CHARS} bringup reads in a SentencePiece piece; the file is "
                           "corrupt: re-convert it")
    if sum(lengths) > MAX_PIECES_CHARS:
        raise BringupError(f"{file.path}: the pieces of tokenizer.ggml.tokens hold {sum(lengths):,} characters, "
                           f"more than the {MAX_PIECES_CHARS:,} bringup reads in a SentencePiece vocabulary; the "
                           "file is corrupt: re-convert it")
