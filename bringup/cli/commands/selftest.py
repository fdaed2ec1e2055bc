"""`bringup selftest`: the runner's logits on the device vs the same model on CPU in float64."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bringup.cli.common import OVERWRITES_TOO, DetailsOption, JsonOption, VerboseOption, stage_context
from bringup.cli.engine_flags import ENGINE_OPTIONS, takes_engine_options
from bringup.cli.output import console, plain, print_json
from bringup.cli.render.check_results import print_section_line
from bringup.runner.engine.options import CPU_FALLBACK, MODEL, TARGET, EngineOptions
from bringup.terminal_text import markup_safe

if TYPE_CHECKING:
    from bringup.profiles.sections.selftest import SelftestSection
    from bringup.runner.engine.engine import LLMEngine


@takes_engine_options(MODEL, CPU_FALLBACK, TARGET, more_help={"force": OVERWRITES_TOO})
def command(
    options: EngineOptions = ENGINE_OPTIONS,
    steps: Annotated[int, typer.Option(min=1, help="Greedy steps to compare (teacher-forced).")] = 16,
    json: JsonOption = False,
    verbose: VerboseOption = False,
    details: DetailsOption = False,
) -> None:
    """Validate the whole runner numerically: its logits on the device, with the plan's dtype and paths,
    against the same model in float64 on the CPU over a fixed prompt and N greedy steps.

    Reports max abs error, top-1 agreement and pass/fail against a dtype-aware threshold, and records
    the result in the profile; ends with `selftest: n pass, n warn, n fail, n skip`. Exit 1 when it fails.
    Example: bringup selftest --device cuda:0 --steps 32
    """
    from bringup.profiles.store import update_profile
    from bringup.runner.engine.engine import LLMEngine

    ctx = stage_context(options.device, options.profile_path, json, verbose, options.strict, options.force)
    engine = LLMEngine.create(replace(options, profile_path=ctx.profile_path, device=str(ctx.device),
                                      max_model_len=512, max_num_seqs=1))
    section = checked_section(engine, options.model_dir, steps, str(ctx.device), options.force)

    def mutate(p) -> None:  # type: ignore[no-untyped-def]
        p.selftest = section

    update_profile(ctx.profile_path, ctx.info, mutate, stage="selftest", status="complete", force=options.force)
    if json:
        print_json("selftest", {"profile": str(ctx.profile_path), **section.model_dump()})
    else:
        (print_details if details else print_summary)(engine, section, ctx.profile_path)
        from bringup.profiles.verdict.run_checks import selftest_checks

        print_section_line("selftest", selftest_checks(section))
    if section.status != "pass":
        sys.exit(1)


def checked_section(engine: LLMEngine, model: Path | None, steps: int, device: str, force: bool) -> SelftestSection:
    """The runner's logits against float64 on the CPU, as the profile's `selftest` section; a run that fell back
    from `device` to another fails."""
    from bringup.profiles.sections.selftest import SelftestSection
    from bringup.runner.selftest import run_selftest

    result = run_selftest(engine, model, steps, allow_nonfinite=force)
    fell_back = engine.plan.device != device
    reasons = [f"ran on {engine.plan.device} after a global fallback, not {device}" if fell_back else None,
               result.nonfinite_reason(), result.error_reason()]
    return SelftestSection(
        status="pass" if result.passed and not fell_back else "fail", model=engine.model_name,
        device=engine.plan.device, dtype=engine.plan.dtype.value, attention=engine.executor.attention_in_use,
        compiled=engine.plan.compiled.value if engine.executor.compiled is not None else None,
        weight_layout=engine.plan.weight_layout.value, prompt_tokens=result.prompt_tokens, steps=result.steps,
        max_abs_err=result.max_abs_err, reference_rms=result.reference_rms, threshold=result.threshold,
        top1_agreement=result.top1_agreement, near_tie_disagreements=result.near_ties,
        fallbacks={k: int(v) for k, v in engine.fallbacks.counts.items()}, seconds=result.seconds,
        reason="; ".join(r for r in reasons if r) or None,
    )


def print_details(engine: LLMEngine, section: SelftestSection, profile_path: Path) -> None:
    """--details: the plan and every figure."""
    from rich.table import Table

    from bringup.cli.commands.generate import print_plan

    print_plan(engine)
    table = Table(title=plain(f"selftest — {section.model} on {section.device} ({section.dtype})"),
                  title_justify="left")
    table.add_column("check")
    table.add_column("value")
    for key in ("status", "max_abs_err", "threshold", "top1_agreement", "near_tie_disagreements", "steps",
                "attention", "weight_layout", "fallbacks"):
        table.add_row(key, plain(getattr(section, key)))
    console.print(table)
    console.print(plain(f"recorded in {profile_path}"))


def print_summary(engine: LLMEngine, section: SelftestSection, profile_path: Path) -> None:
    style = "green" if section.status == "pass" else "red"
    console.print(f"[{style}]selftest {section.status}[/]: " + markup_safe(
                  f"{section.model} on {section.device} "
                  f"({section.dtype}, {section.attention}): max abs err {section.max_abs_err:.3g} "
                  f"(threshold {section.threshold:.3g}), top-1 agreement {section.top1_agreement:.3f} "
                  f"over {section.steps} steps" + reference_note(engine.plan.quantization.value)
                  + (f"; {section.reason}" if section.reason else "")),
                  highlight=False)
    console.print(plain(f"recorded in {profile_path} (--details: the plan and every figure; -v: logs)"),
                  highlight=False)


def reference_note(scheme: str) -> str:
    """Against quantized weights the float64 reference holds the same quantized weights, dequantized."""
    return "" if scheme == "none" else f"; {scheme} weights vs float64 of the same {scheme} weights (dequantized)"
