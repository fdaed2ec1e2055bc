"""The windows and token budget an eval runs with: as given, else the reference file's, else the defaults; and
the one-line refusals when a reference file was made from something else."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.errors import BringupError
from bringup.runner.eval.reference_header import ReferenceHeader
from bringup.runner.eval.windows import check_window_sizes

DEFAULT_CTX = 512


@dataclass(frozen=True)
class EvalSettings:
    ctx: int
    stride: int
    max_tokens: int | None  # None: the whole text


def resolve_settings(ctx: int | None, stride: int | None, max_tokens: int | None,
                     reference: ReferenceHeader | None) -> EvalSettings:
    """Given values win, but must equal a reference file's (its windows are the only ones it can be compared on)."""
    if reference is not None:
        for option, given, recorded in (("--ctx", ctx, reference.ctx), ("--stride", stride, reference.stride)):
            if given is not None and given != recorded:
                raise BringupError(f"{option} {given} differs from the reference's {recorded}: its positions were "
                                   f"scored with {option} {recorded}; leave {option} out to use it")
        ctx, stride = reference.ctx, reference.stride
    ctx = DEFAULT_CTX if ctx is None else ctx
    stride = max(1, ctx // 2) if stride is None else stride
    check_window_sizes(ctx, stride)
    if max_tokens is not None and max_tokens < 2:
        raise BringupError(f"--max-tokens {max_tokens}: at least 2 tokens are needed to score one; give more")
    return EvalSettings(ctx, stride, max_tokens)


def reference_tokens(tokens: list[int], max_tokens: int | None, reference: ReferenceHeader) -> list[int]:
    """The text's tokens cut as the reference's were (to its token count when --max-tokens is not given)."""
    if max_tokens is not None and max_tokens != reference.tokens:
        raise BringupError(f"--max-tokens {max_tokens} differs from the reference's {reference.tokens} tokens; "
                           "leave --max-tokens out to use its count")
    return tokens[:reference.tokens]


def check_reference(reference: ReferenceHeader, text_sha: str, tokens_sha: str, vocab_size: int,
                    source: str) -> None:
    """Refuse, in one line, a reference made from another text or with another tokenizer."""
    if reference.text_sha256 != text_sha:
        raise BringupError(f"--reference {source} was made from another text (sha256 {reference.text_sha256[:12]}, "
                           f"this text {text_sha[:12]}); give the --text it was saved with")
    if reference.tokens_sha256 != tokens_sha or reference.vocab_size != vocab_size:
        raise BringupError(f"--reference {source} was made with another tokenizer: the same text gives other token "
                           f"ids (vocabulary {reference.vocab_size} there, {vocab_size} here); compare models "
                           "that share a tokenizer")
