"""The profile's model evals as one table both writers share: perplexity, and the comparison with a reference."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.profiles.sections.eval import EvalRecord
from bringup.report.text import MISSING, number

EVAL_HEADERS = ["model", "dtype", "device", "windows", "tokens", "perplexity", "NLL ± SE", "tokens/s", "reference",
                "KLD mean / p99 / max", "top-1", "Δ ppl"]


@dataclass
class EvalRow:
    cells: list[str]  # in EVAL_HEADERS order
    diverged: bool  # top-1 agreement under 100 % against a reference


def eval_rows(evals: dict[str, EvalRecord] | None) -> list[EvalRow]:
    return [eval_row(key, record) for key, record in sorted((evals or {}).items())]


def eval_row(key: str, r: EvalRecord) -> EvalRow:
    ref = r.reference
    common = [key, r.dtype, r.device, f"{r.windows} × ctx {r.ctx}, stride {r.stride}", f"{r.scored} of {r.tokens}",
              number(r.ppl, 5), f"{r.nll:.4f} ± {r.se:.4f}", number(r.tokens_per_s)]
    if ref is None:
        return EvalRow([*common, "none", MISSING, MISSING, MISSING], False)
    bound = "" if ref.exact else f" (≥, top {ref.k})"
    source = f"{ref.source}: {ref.reference_dtype or MISSING} on {ref.reference_device or MISSING}, " \
             f"ppl {number(ref.reference_ppl, 5)}"
    return EvalRow([*common, source, f"{number(ref.kld_mean)} / {number(ref.kld_p99)} / {number(ref.kld_max)}{bound}",
                    f"{ref.top1_agreement:.2%}", f"{ref.delta_ppl:+.4g}"], ref.top1_agreement < 1.0)
