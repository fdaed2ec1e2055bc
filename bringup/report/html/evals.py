"""HTML section of the model evals: perplexity per model and dtype, and how far each was from its reference."""

from __future__ import annotations

from bringup.report.html.parts import Html, not_measured, paragraph, section, table
from bringup.report.sections.evals import EVAL_HEADERS, EvalRow


def eval_section(rows: list[EvalRow]) -> Html:
    if not rows:
        return section("evals", "Model evals", not_measured("model evals", "Run `bringup eval --model DIR`."))
    note = paragraph("KLD is KL(reference ‖ this run) per scored token; against a saved top-k reference it is a lower "
                     "bound (≥), the rest of the vocabulary counted as one token. Rows whose top-1 agreement is "
                     "under 100 % are marked.")
    return section("evals", "Model evals", note + table("evals-table", EVAL_HEADERS, [r.cells for r in rows],
                                                        ["warn" if r.diverged else "" for r in rows]))
