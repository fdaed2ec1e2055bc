"""`bringup eval`: a real model's perplexity over a text through the runner, and its KL divergence and top-1
agreement against a reference run (float64 on the CPU here, or a file saved on a machine you trust)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bringup.cli.common import OVERWRITES_TOO, DetailsOption, JsonOption, VerboseOption, stage_context
from bringup.cli.engine_flags import ENGINE_OPTIONS, takes_engine_options
from bringup.cli.output import console, plain, print_json, progress
from bringup.runner.engine.options import CPU_FALLBACK, MODEL, TARGET, EngineOptions

if TYPE_CHECKING:
    from bringup.profiles.sections.eval import EvalRecord
    from bringup.runner.eval.run import ReferenceSpec


@takes_engine_options(MODEL, CPU_FALLBACK, TARGET, more_help={"force": OVERWRITES_TOO})
def command(
    options: EngineOptions = ENGINE_OPTIONS,
    text: Annotated[Optional[Path], typer.Option(
        "--text", help="UTF-8 text file to score (default: bringup's own docs, shipped with it).")] = None,
    ctx: Annotated[Optional[int], typer.Option(
        "--ctx", help="Tokens per window (default 512, or the reference file's).")] = None,
    stride: Annotated[Optional[int], typer.Option(
        "--stride", help="A window starts every STRIDE tokens, 1 <= stride < ctx (default ctx/2, or the reference "
        "file's).")] = None,
    max_tokens: Annotated[Optional[int], typer.Option(
        "--max-tokens", help="Score only the text's first N tokens (default: all, or the reference file's count).")
    ] = None,
    reference: Annotated[Optional[str], typer.Option(
        "--reference", help="Compare with `float64` (the same weights on the CPU in float64: exact KL) or a FILE "
        "saved by --save-reference (KL over its top-k tokens: a lower bound).")] = None,
    save_reference: Annotated[Optional[Path], typer.Option(
        "--save-reference", help="Write this run's top-k log-probabilities per position to OUT (safetensors), to be "
        "given as --reference on another machine or in another dtype.")] = None,
    top_k: Annotated[int, typer.Option("--top-k", min=1, help="Log-probabilities kept per position by "
                                       "--save-reference.")] = 32,
    json: JsonOption = False,
    verbose: VerboseOption = False,
    details: DetailsOption = False,
) -> None:
    """Score a text with the model through the runner (the plan's dtype, attention and paths) in sliding windows:
    perplexity, mean negative log-likelihood ± its standard error, tokens/s; with --reference, the KL divergence
    (mean, p99, max), top-1 agreement and Δ perplexity against the reference. Recorded in the profile's `eval`
    section. Example: bringup eval --model ./SmolLM2 --reference float64 --max-tokens 2048
    """
    from bringup.profiles.store import update_profile
    from bringup.runner.engine.engine import LLMEngine
    from bringup.runner.eval.record import eval_key, eval_record
    from bringup.runner.eval.reference_file import check_writable
    from bringup.runner.eval.run import eval_tokens, run_eval
    from bringup.runner.eval.settings import resolve_settings
    from bringup.runner.eval.text import read_text

    model, force = options.model_dir, options.force
    stage = stage_context(options.device, options.profile_path, json, verbose, options.strict, force)
    spec = reference_spec(reference)
    header = spec.header if spec is not None else None
    settings = resolve_settings(ctx, stride, max_tokens, header)
    if save_reference is not None:
        reads = [stage.profile_path, *(Path(p) for p in (text, reference) if p is not None and p != "float64")]
        check_writable(save_reference, reads)
    eval_text = read_text(text)
    engine = LLMEngine.create(replace(options, profile_path=stage.profile_path, device=str(stage.device),
                                      max_model_len=settings.ctx, max_num_seqs=1))
    tokens = eval_tokens(engine, eval_text, settings, spec)
    if not json:
        print_run_plan(engine, eval_text.source, spec, details)
    with progress(json) as bar:
        task = bar.add_task("eval windows", total=None)
        result = run_eval(engine, model, eval_text, tokens, settings, spec, save_reference, top_k,
                          on_window=lambda done, total: bar.update(task, completed=done, total=total))
    key = eval_key(result, model)
    record = eval_record(result, header)

    def mutate(p) -> None:  # type: ignore[no-untyped-def]
        p.eval = {**(p.eval or {}), key: record}

    update_profile(stage.profile_path, stage.info, mutate, stage="eval", status="complete", force=force)
    if json:
        print_json("eval", {"profile": str(stage.profile_path), "key": key, "saved_reference": result.saved_reference,
                    **record.model_dump()})
        return
    print_result(key, record)
    if result.saved_reference:
        console.print(plain(f"reference saved to {result.saved_reference} (top {min(top_k, engine.vocab_size)} "
                            "log-probabilities per position)"), highlight=False)
    console.print(plain(f"recorded in {stage.profile_path} under {key!r}"), highlight=False)


def reference_spec(reference: str | None) -> ReferenceSpec | None:
    from bringup.runner.eval.reference_file import load_reference
    from bringup.runner.eval.run import FLOAT64, ReferenceSpec

    if reference is None:
        return None
    if reference == FLOAT64:
        return ReferenceSpec(FLOAT64)
    header, rows = load_reference(Path(reference))
    return ReferenceSpec(reference, header, rows)


def quantization_note(scheme: str, from_checkpoint: bool = False) -> str:
    """What a float64 reference is against quantized weights: the unquantized model, so the figures include the
    quantization's own error; for a pre-quantized checkpoint, its own weights dequantized (there is no other)."""
    if from_checkpoint:
        return ", the checkpoint's own quantized weights dequantized (it holds no unquantized ones)"
    return "" if scheme == "none" else f", unquantized (so the figures are the {scheme} quantization's accuracy)"


def print_run_plan(engine, text_source: str, spec: ReferenceSpec | None, details: bool) -> None:  # type: ignore[no-untyped-def]
    from bringup.cli.commands.generate import print_plan

    if details:
        print_plan(engine)
    plan = engine.plan
    stored = engine.executor.model.config.stored_quantization is not None
    against = "no reference" if spec is None else (
        "float64 on the CPU" + quantization_note(plan.quantization.value, stored) if spec.header is None else
        f"{spec.source} ({spec.header.model}, {spec.header.dtype} on {spec.header.device}, top {spec.header.k})")
    console.print(plain(f"eval {engine.model_name} on {plan.device}: {plan.dtype.value}, attention "
                        f"{engine.executor.attention_in_use}, {plan.compiled.value or 'eager'}, weights "
                        f"{plan.weight_layout.value}; text {text_source}; against {against}"), highlight=False)


def print_result(key: str, record: EvalRecord) -> None:
    from rich.table import Table

    table = Table(title=plain(f"eval — {key} on {record.device} ({record.dtype})"), title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    rows = [("perplexity", f"{record.ppl:.4f}"), ("NLL (nats/token)", f"{record.nll:.5f} ± {record.se:.5f}"),
            ("tokens scored", f"{record.scored} of {record.tokens}"),
            ("windows", f"{record.windows} (ctx {record.ctx}, stride {record.stride})"),
            ("tokens/s", f"{record.tokens_per_s:.1f}")]
    r = record.reference
    if r is not None:
        bound = "" if r.exact else " (lower bound)"
        rows += [("reference", f"{r.source} ({r.reference_dtype} on {r.reference_device})"),
                 ("reference perplexity", f"{r.reference_ppl:.4f}"), ("Δ perplexity", f"{r.delta_ppl:+.4g}"),
                 (f"KLD mean{bound}", f"{r.kld_mean:.4g}"), (f"KLD p99{bound}", f"{r.kld_p99:.4g}"),
                 (f"KLD max{bound}", f"{r.kld_max:.4g}"), ("top-1 agreement", f"{r.top1_agreement:.2%}")]
        if not r.exact:
            rows.append((f"reference mass outside its top {r.k}", f"{r.rest_mass_mean:.4g} (mean)"))
    for name, value in rows:
        table.add_row(plain(name), plain(value))
    console.print(table)
    if r is not None and not r.exact:
        console.print(plain(f"KLD against a top-{r.k} reference counts the rest of the vocabulary as one token: a "
                            "lower bound of the full KL divergence"), highlight=False)
