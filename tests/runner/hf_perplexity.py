"""Perplexity computed directly with transformers, Hugging Face's sliding-window recipe written out on its own: the
independent figure `bringup eval` is checked against (tests) and timed against (benchmarks/eval_speed.py)."""

from __future__ import annotations

import math
from pathlib import Path

import torch


def text_tokens(model_dir: Path, text: str, max_tokens: int | None = None) -> list[int]:
    """The text's ids from the model's tokenizer.json, no special tokens added (as `bringup eval` tokenizes)."""
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(model_dir / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    return ids[:max_tokens] if max_tokens is not None else ids


def load_hf(model_dir: Path, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=dtype).eval()


def hf_window_nlls(model: torch.nn.Module, tokens: list[int], ctx: int, stride: int) -> torch.Tensor:
    """Per scored token NLL: windows of ctx tokens every stride tokens; each window scores the tokens after the
    previous window's end (its first token is context only); stop at the window reaching the end."""
    nlls, previous_end = [], 1
    with torch.inference_mode():
        for begin in range(0, len(tokens), stride):
            end = min(begin + ctx, len(tokens))
            ids = torch.tensor([tokens[begin:end]])
            logprobs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
            nll = -logprobs.gather(-1, ids[0, 1:].unsqueeze(-1)).squeeze(-1)
            nlls.append(nll[previous_end - begin - 1:].double())
            previous_end = end
            if end == len(tokens):
                break
    return torch.cat(nlls)


def hf_perplexity(model: torch.nn.Module, tokens: list[int], ctx: int, stride: int) -> float:
    return math.exp(float(hf_window_nlls(model, tokens, ctx, stride).mean()))
