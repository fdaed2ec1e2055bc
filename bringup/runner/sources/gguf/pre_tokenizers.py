"""How text is split before byte-level BPE, by the name llama.cpp's converter writes in `tokenizer.ggml.pre`.

Each split is the one the model's own tokenizer.json uses (and llama.cpp applies for that name). A name not
listed is refused in one line (llama.cpp refuses it too); a file with no name gets GPT-2's split, as llama.cpp
does, with a WARNING.
"""

from __future__ import annotations

from typing import Any

from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.terminal_text import shown

log = get_logger("runner.gguf")

# Qwen2's split: contractions, letters with one leading non-letter, single digits, punctuation runs, newlines.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+"
               r"|\s+(?!\S)|\s+")
# Llama 3's: the same with digits in groups of up to three.
LLAMA3_SPLIT = QWEN2_SPLIT.replace(r"|\p{N}|", r"|\p{N}{1,3}|")

GPT2, DIGITS_THEN_GPT2, QWEN2, LLAMA3 = "gpt2", "digits+gpt2", "qwen2", "llama3"
SPLITS = {"default": GPT2, "gpt-2": GPT2, "gpt2": GPT2, "smollm": DIGITS_THEN_GPT2,
          "qwen2": QWEN2, "deepseek-r1-qwen": QWEN2, "llama-bpe": LLAMA3, "llama3": LLAMA3, "smaug-bpe": LLAMA3,
          "dbrx": LLAMA3}
IGNORES_MERGES = (LLAMA3,)  # a word already in the vocabulary is one token, whatever the merges say


def split_kind(pre: str | None, source: str, fallbacks: FallbackRecorder | None = None) -> str:
    """The split `tokenizer.ggml.pre` names; None (absent) is GPT-2's: a fallback (WARNING, counted, refused by
    --strict)."""
    if pre is None:
        why = f"{source} has no tokenizer.ggml.pre"
        if fallbacks is None:
            log.warning("%s; splitting text as GPT-2 does (llama.cpp's default)", why)
        else:
            fallbacks.record("op", "text split", wanted="the file's tokenizer.ggml.pre",
                             instead="GPT-2's split (llama.cpp's default)", why=why)
        return GPT2
    if pre not in SPLITS:
        raise BringupError(f"{source}: tokenizer.ggml.pre {shown(pre)[:60]!r} is a text split bringup does not "
                           f"know; known: {', '.join(sorted(SPLITS))}")
    return SPLITS[pre]


def pre_tokenizer(kind: str) -> Any:
    """The tokenizers-library pre-tokenizer for a split kind."""
    from tokenizers import Regex, pre_tokenizers

    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=kind in (GPT2, DIGITS_THEN_GPT2))
    if kind == GPT2:
        return byte_level
    if kind == DIGITS_THEN_GPT2:
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    split = QWEN2_SPLIT if kind == QWEN2 else LLAMA3_SPLIT
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), behavior="isolated"), byte_level])
