"""The tokenizer a GGUF file describes in its metadata, built with the tokenizers library, as TokenizerData.

Two kinds, by `tokenizer.ggml.model`: byte-level BPE ("gpt2": GPT-2, SmolLM, Qwen, Llama 3 vocabularies), built
here from the tokens (ids are their positions), the merges and the split `tokenizer.ggml.pre` names; and
SentencePiece ("llama": Llama 2, Mistral v1, Gemma), built in sentencepiece.py from the tokens and their scores. Both
get the same rest: the vocabulary rules, control tokens (type 3; for SentencePiece unknown ones, type 2, too) as
special tokens and user-defined ones (type 4) as added tokens matched whole, BOS/EOS added when `add_bos_token` /
`add_eos_token` say so (absent: BOS for SentencePiece, as llama.cpp), and `tokenizer.chat_template` (plus named
`tokenizer.chat_template.<name>` ones). Other models ("bert", "t5", "rwkv", ...) are refused in one line.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.runner.model_files import MAX_TEMPLATE_BYTES
from bringup.runner.sources.gguf import metadata
from bringup.runner.sources.gguf.pre_tokenizers import IGNORES_MERGES, pre_tokenizer, split_kind
from bringup.runner.sources.gguf.reader import GGUFFile
from bringup.runner.sources.gguf.sentencepiece import sentencepiece_tokenizer
from bringup.runner.text.chat_template import ChatTemplate
from bringup.runner.text.tokenizer import TokenizerData
from bringup.runner.text.vocabulary import RepeatedEntry, TokenList, VocabularyError, merge_pairs, token_list
from bringup.terminal_text import quoted, shown

log = get_logger("runner.gguf.tokenizer")

UNKNOWN, CONTROL, USER_DEFINED = 2, 3, 4  # llama.cpp's token types
BYTE_LEVEL_BPE, SENTENCEPIECE = "gpt2", "llama"  # tokenizer.ggml.model
SPECIAL_TYPES = {BYTE_LEVEL_BPE: (CONTROL,), SENTENCEPIECE: (UNKNOWN, CONTROL)}  # added as special tokens
ADDS_BOS = {BYTE_LEVEL_BPE: False, SENTENCEPIECE: True}  # when add_bos_token is absent (SentencePiece: as llama.cpp)
SPECIAL_IDS = {"bos_token": "bos_token_id", "eos_token": "eos_token_id", "unk_token": "unknown_token_id",
               "pad_token": "padding_token_id"}
STOP_IDS = ("eos_token_id", "eot_token_id", "eom_token_id")  # llama.cpp ends generation at any of these
# control tokens llama.cpp also ends generation at by their text, when the file names no end-of-turn id (Gemma's
# files carry only <eos>, while its chat turns end with <end_of_turn>)
END_OF_TURN_TEXTS = ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
                     "<|end_of_text|>", "<end_of_utterance>")
TEMPLATE_KEY = "tokenizer.chat_template"
TOKENS_KEY, MERGES_KEY = "tokenizer.ggml.tokens", "tokenizer.ggml.merges"
BOS_KEY, EOS_KEY = "tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token"


def gguf_tokenizer_data(file: GGUFFile, fallbacks: FallbackRecorder | None = None) -> TokenizerData:
    where = str(file.path)
    model = metadata.text(file, "tokenizer.ggml.model")
    if model not in SPECIAL_TYPES:
        raise BringupError(f"{where}: its tokenizer is {shown(model)[:40]!r}; bringup builds byte-level BPE "
                           "('gpt2') and SentencePiece ('llama') tokenizers from GGUF metadata: load the model's "
                           "Hugging Face directory instead")
    tokens = metadata.texts(file, TOKENS_KEY)
    ids = {name: _token_id(file, key, len(tokens)) for name, key in SPECIAL_IDS.items()}
    config: dict[str, Any] = {name: tokens[i] for name, i in ids.items() if i is not None}
    named_stops = {key: _token_id(file, key, len(tokens)) for key in STOP_IDS}
    stops = [i for i in named_stops.values() if i is not None]
    by_text = [] if named_stops["eot_token_id"] is not None else _end_of_turn_by_text(file, tokens, stops)
    generation_source = f"{where} (tokenizer.ggml.*_token_id)"
    if by_text:
        named = ", ".join(quoted(tokens[i]) for i in by_text)
        generation_source += f"; {named} by text, as llama.cpp ends a turn at them"
        log.info("%s names no end-of-turn token: generation also ends at %s, taken by text as llama.cpp does",
                 where, named)
    stops += by_text
    return TokenizerData(
        tokenizer_json=_tokenizer_json(file, model, tokens, ids, fallbacks),
        config=config, generation={"eos_token_id": stops} if stops else {},
        chat_templates=_chat_templates(file), source=where, tokenizer_source=f"{where} (tokenizer.ggml.*)",
        config_source=f"{where} (tokenizer.ggml.*)", generation_source=generation_source,
        template_places=f"{where} has no chat template ({TEMPLATE_KEY} in its metadata)")


def _end_of_turn_by_text(file: GGUFFile, tokens: list[str], stops: list[int]) -> list[int]:
    """Control tokens whose text ends a turn (END_OF_TURN_TEXTS), not already among `stops`."""
    types = metadata.integers(file, "tokenizer.ggml.token_type", [])
    wanted = set(END_OF_TURN_TEXTS)
    return [i for i, (text, kind) in enumerate(zip(tokens, types)) if kind == CONTROL and text in wanted
            and i not in stops]


def _tokenizer_json(file: GGUFFile, model: str, tokens: list[str], ids: dict[str, int | None],
                    fallbacks: FallbackRecorder | None) -> str:
    from tokenizers import AddedToken

    types = metadata.integers(file, "tokenizer.ggml.token_type", [])
    if types and len(types) != len(tokens):
        raise BringupError(f"{file.path}: tokenizer.ggml.token_type has {len(types)} entries for {len(tokens)} "
                           "tokens; the file is corrupt: re-convert it")
    special = [i for i, t in enumerate(types) if t in SPECIAL_TYPES[model]]
    user_defined = [i for i, t in enumerate(types) if t == USER_DEFINED]
    if model == SENTENCEPIECE:
        whole = {*special, *user_defined}
        pieces = [i for i in range(len(tokens)) if i not in whole]
        tok = sentencepiece_tokenizer(file, tokens, _vocabulary(file, tokens, tokens), pieces, ids["unk_token"])
    else:
        tok = _byte_level_bpe(file, tokens, types, fallbacks)
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False) for i in special])
    tok.add_tokens([AddedToken(tokens[i], special=False, normalized=False) for i in user_defined])
    _add_bos_eos(file, tok, tokens, ids, ADDS_BOS[model])
    return tok.to_str()


def _byte_level_bpe(file: GGUFFile, tokens: list[str], types: list[int], fallbacks: FallbackRecorder | None) -> Any:
    """The tokenizers-library Tokenizer of a byte-level BPE vocabulary, without its added tokens and
    post-processor."""
    from tokenizers import Tokenizer, decoders, models

    kind = split_kind(metadata.text(file, "tokenizer.ggml.pre", None), str(file.path), fallbacks)
    spelled = [token if types and types[i] in (CONTROL, USER_DEFINED) else _byte_level(token)
               for i, token in enumerate(tokens)]
    vocabulary = _vocabulary(file, tokens, spelled)
    tok = Tokenizer(models.BPE(vocab=vocabulary.ids, merges=_merges(file, vocabulary),
                               ignore_merges=kind in IGNORES_MERGES))
    tok.pre_tokenizer = pre_tokenizer(kind)
    tok.decoder = decoders.ByteLevel()
    return tok


def _add_bos_eos(file: GGUFFile, tok: Any, tokens: list[str], ids: dict[str, int | None], adds_bos: bool) -> None:
    """The post-processor that puts BOS before and EOS after the text, as add_bos_token / add_eos_token say."""
    from tokenizers import processors

    bos, eos = ids["bos_token"], ids["eos_token"]
    added = [(tokens[bos], bos)] if bos is not None and metadata.flag(file, BOS_KEY, adds_bos) else []
    appended = [(tokens[eos], eos)] if eos is not None and metadata.flag(file, EOS_KEY, False) else []
    if added or appended:
        before, after = [t for t, _ in added], [t for t, _ in appended]
        tok.post_processor = processors.TemplateProcessing(
            single=[*before, "$A", *after], pair=[*before, "$A", *after, *before, "$B:1", *after],
            special_tokens=added + appended)


def _vocabulary(file: GGUFFile, tokens: list[str], spelled: list[str]) -> TokenList:
    """Each token as the model spells it (`spelled[i]`, tokens[i] re-spelled or as it is) and its id (its
    position), checked by the vocabulary rules."""
    try:
        return token_list(TOKENS_KEY, spelled, range(len(tokens)))
    except RepeatedEntry as exc:  # ids are positions, so this is one token spelled twice
        first, second = (tokens[i] for i in exc.ids)
        alike = "" if first == second else \
            f" once spelled in the byte-level alphabet (written {quoted(first)} and {quoted(second)})"
        raise BringupError(f"{file.path}: {exc}{alike}; the file is corrupt: re-convert it") from None


def _merges(file: GGUFFile, vocabulary: TokenList) -> list[tuple[str, str]]:
    """The merges as pairs, each checked by the vocabulary rules (its parts and what it makes are tokens)."""
    try:
        return merge_pairs(MERGES_KEY, metadata.texts(file, MERGES_KEY), vocabulary)
    except VocabularyError as exc:
        raise BringupError(f"{file.path}: {exc}; the file is corrupt: re-convert it") from None


def _token_id(file: GGUFFile, key: str, count: int) -> int | None:
    value = metadata.integer(file, f"tokenizer.ggml.{key}", None)
    if value is not None and not 0 <= value < count:
        raise BringupError(f"{file.path}: tokenizer.ggml.{key} is {value}, outside the {count} tokens; the file is "
                           "corrupt: re-convert it")
    return value


def _chat_templates(file: GGUFFile) -> dict[str, ChatTemplate]:
    """'default' from tokenizer.chat_template, and each tokenizer.chat_template.<name>."""
    templates = {}
    for key in file.metadata:
        if key == TEMPLATE_KEY or key.startswith(TEMPLATE_KEY + "."):
            name = key.removeprefix(TEMPLATE_KEY).removeprefix(".") or "default"
            text = metadata.text(file, key)
            if len(text.encode("utf-8")) > MAX_TEMPLATE_BYTES:  # the cap a directory's template file has
                raise BringupError(f"{file.path}: {key} is {len(text.encode('utf-8'))} bytes, more than the "
                                   f"{MAX_TEMPLATE_BYTES} a chat template may be; the file is corrupt: re-convert it")
            templates[name] = ChatTemplate(text, f"{file.path} ({key})")
    return templates


def _byte_level(token: str) -> str:
    """A token in the byte-level alphabet (GPT-2's printable stand-ins for bytes), as BPE vocabularies spell
    them; a token a converter wrote as plain text is re-spelled from its UTF-8 bytes."""
    alphabet = _alphabet()
    if all(ch in alphabet for ch in token):
        return token
    return "".join(_stand_ins()[b] for b in token.encode("utf-8"))


@lru_cache(maxsize=1)
def _stand_ins() -> dict[int, str]:
    """Byte -> its character in the byte-level alphabet: printable Latin-1 bytes stand for themselves, the rest
    are shifted above 255 in order."""
    kept = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in kept]
    return {**{b: chr(b) for b in kept}, **{b: chr(256 + n) for n, b in enumerate(shifted)}}


@lru_cache(maxsize=1)
def _alphabet() -> frozenset[str]:
    return frozenset(_stand_ins().values())
