"""The LLM speed card section: the figures with their spread, and the latency distributions they come from."""

from __future__ import annotations

from bringup.report.html.latency_svg import latency_svg
from bringup.report.html.parts import Html, not_measured, paragraph, section, table
from bringup.report.sections.speed_card import SpeedCard


def speed_card_section(card: SpeedCard | None) -> Html:
    if card is None:
        return section("speed", "LLM speed card", not_measured("the speed card", "Run `bringup bench --only serve`."))
    body = paragraph(card.note, "note") + table("speed-card", ["figure", "value", "spread"],
                                                [[f.label, f.value, f.spread] for f in card.figures])
    if card.distributions:
        body += Html(f"<figure>{latency_svg(card.distributions)}</figure>")
    return section("speed", f"LLM speed card: {card.model}" if card.model else "LLM speed card", body)
