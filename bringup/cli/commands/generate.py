"""`bringup generate`: one prompt through the bundled runner, with the plan and the timings."""

from __future__ import annotations

import time
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from bringup.cli.common import JsonOption, VerboseOption
from bringup.cli.engine_flags import ENGINE_OPTIONS, takes_engine_options
from bringup.cli.output import console, err_console, plain, print_json
from bringup.errors import BringupError
from bringup.log import configure_logging
from bringup.runner.engine.options import CHAT, CONTEXT, CPU_FALLBACK, MODEL, TARGET, EngineOptions
from bringup.terminal_text import shown

if TYPE_CHECKING:  # the runner imports torch: loaded when the command runs, not for --help
    from bringup.runner.engine.engine import LLMEngine
    from bringup.runner.sampling_params import SamplingParams

__all__ = ["command", "print_plan"]
BUILT_IN_DEFAULTS: dict[str, Any] = {"max_tokens": 64, "temperature": 0.0}


@takes_engine_options(MODEL, CONTEXT, CPU_FALLBACK, CHAT, TARGET)
def command(
    prompt: Annotated[str, typer.Argument(help="The prompt text.")],
    options: EngineOptions = ENGINE_OPTIONS,
    max_tokens: Annotated[Optional[int], typer.Option(help="Tokens to generate (default 64).")] = None,
    temperature: Annotated[Optional[float], typer.Option(help="0 = greedy (the default).")] = None,
    top_p: Annotated[Optional[float], typer.Option(help="Nucleus sampling mass, (0, 1].")] = None,
    top_k: Annotated[Optional[int], typer.Option(help="Keep the k most likely tokens (0 = off).")] = None,
    min_p: Annotated[Optional[float], typer.Option(help="Drop tokens below min_p × the top probability.")] = None,
    repetition_penalty: Annotated[Optional[float], typer.Option(help="> 1 discourages repeats.")] = None,
    seed: Annotated[Optional[int], typer.Option(help="Seed for reproducible sampling.")] = None,
    stop: Annotated[Optional[list[str]], typer.Option(help="Stop string (repeatable).")] = None,
    ignore_eos: Annotated[bool, typer.Option(help="Keep generating past end-of-sequence tokens.")] = False,
    chat: Annotated[bool, typer.Option(help="Wrap the prompt as a user message with the chat template.")] = False,
    json: JsonOption = False,
    verbose: VerboseOption = False,
) -> None:
    """Generate text for PROMPT with the runner and the execution plan derived from the profile.

    Prints the plan (each choice with its evidence), the text, time to first token and decode
    tokens/s. Example: bringup generate "The capital of France is" --max-tokens 32
    """
    from bringup.runner.engine.engine import LLMEngine

    configure_logging(verbose, quiet=json)
    given = {name: value for name, value in dict(
        max_tokens=max_tokens, temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
        repetition_penalty=repetition_penalty, seed=seed, stop=stop).items() if value is not None}
    check_flags(given)  # before the model loads: a bad flag costs nothing
    engine = LLMEngine.create(replace(options, max_num_seqs=1))
    text = prompt
    try:
        if chat:
            text = engine.tokenizer.apply_chat_template([{"role": "user", "content": prompt}])
        ids = engine.tokenizer.encode(text, add_special_tokens=not chat)
        params = sampling_params(engine.tokenizer.generation_defaults, given, ignore_eos)
        params.max_tokens = tokens_to_generate(params.max_tokens, "max_tokens" in given, len(ids),
                                               engine.max_model_len)
        result = run_one(engine, ids, params)
    except ValueError as exc:
        raise BringupError(f"{exc}") from None
    if json:
        print_json("generate", {"model": engine.model_name, "plan": engine.plan.to_dict(), **result,
                    "fallbacks": engine.fallbacks.summary()})
        return
    print_plan(engine)
    console.print(shown(text), style="dim", end="", markup=False, highlight=False)
    console.print(shown(result["text"]), markup=False, highlight=False)
    err_console.print(f"{result['prompt_tokens']} prompt + {result['completion_tokens']} generated tokens "
                      f"({result['finish_reason']}); time to first token {result['ttft_s'] * 1000:.1f} ms; "
                      f"decode {result['decode_tokens_per_s']:.1f} tokens/s")


def check_flags(given: dict[str, Any]) -> None:
    """The sampling flags alone, by the rules the server applies to a request (SamplingParams.validate_request)."""
    from bringup.runner.sampling_params import SamplingParams

    try:
        SamplingParams(**{**BUILT_IN_DEFAULTS, **given}).validate_request()
    except ValueError as exc:
        field, _, why = str(exc).partition(": ")
        raise BringupError(f"--{field.replace('_', '-')} {why}") from None


def sampling_params(defaults: dict, given: dict[str, Any], ignore_eos: bool) -> SamplingParams:
    """Built-in defaults (greedy, 64 tokens) < generation_config.json < flags; BringupError if invalid."""
    from bringup.runner.sampling_params import SamplingParams

    known = {f.name for f in fields(SamplingParams)}
    values = {**BUILT_IN_DEFAULTS, **{k: v for k, v in defaults.items() if k in known}, **given}
    params = SamplingParams(**values, ignore_eos=ignore_eos)
    try:
        params.validate_request()
    except ValueError as exc:  # the flags passed check_flags, so a default from generation_config.json is out of range
        field = str(exc).partition(":")[0]
        raise BringupError(f"the model's generation_config.json default {exc}; override it with "
                           f"--{field.replace('_', '-')}") from None
    return params


def tokens_to_generate(max_tokens: int, requested: bool, prompt_len: int, max_model_len: int) -> int:
    """max_tokens as the server grants it: a requested count must fit the context after the prompt (else
    ValueError); a default is capped to the room left."""
    from bringup.runner.sampling_params import token_budget

    if requested:
        return token_budget(prompt_len, max_model_len, max_tokens)
    return min(max_tokens, token_budget(prompt_len, max_model_len, None))


def run_one(engine: LLMEngine, ids: list[int], params: SamplingParams) -> dict:
    """Generate for one prompt; time to first token and decode rate from the step timings."""
    start = time.perf_counter()
    engine.add_request("generate", ids, params)
    first = last = None
    out = None
    while engine.has_unfinished():
        for o in stepped(engine):
            out = o
        now = time.perf_counter()
        first = first or now
        last = now
    assert out is not None and first is not None and last is not None
    if out.error is not None:  # e.g. non-finite logits: what was generated cannot be trusted, so none is shown
        raise BringupError(out.error.message)
    decoded = len(out.token_ids) - 1
    return {"text": out.text, "token_ids": out.token_ids, "prompt_tokens": len(ids),
            "completion_tokens": len(out.token_ids), "finish_reason": out.finish_reason,
            "ttft_s": first - start, "decode_s": last - first,
            "decode_tokens_per_s": decoded / (last - first) if decoded > 0 and last > first else 0.0}


def stepped(engine: LLMEngine) -> list:
    """One engine step; a device of the plan that stopped answering under it ends the run in one line (exit 1)."""
    from bringup.runner.engine.device_loss import DeviceLostError, device_loss

    try:
        return engine.step()
    except Exception as exc:
        loss = device_loss(engine.plan, exc)
        if loss is None:
            raise
        raise DeviceLostError(loss.message) from None


def print_plan(engine: LLMEngine) -> None:
    from rich.table import Table

    table = Table(title=plain(f"execution plan — {engine.model_name} on {engine.plan.device}"), title_justify="left")
    for col in ("setting", "choice", "evidence"):
        table.add_column(col, overflow="fold")
    for row in engine.plan.rows():
        table.add_row(*(plain(cell) for cell in row))
    console.print(table)
