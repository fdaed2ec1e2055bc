"""Small HTML builders. Every string that may come from a profile goes through `e` (escape) exactly once, here or
in the caller; markup passed as `Html` is trusted because it was built by these functions."""

from __future__ import annotations

import re
from collections.abc import Iterable
from html import escape

from bringup.report.sections.identity import Fact


class Html(str):
    """Markup already built (and escaped) by this package; anything else is text and is escaped."""


def e(text: object) -> str:
    return escape("" if text is None else str(text), quote=True)


SHORT_CELL = 24  # characters: a figure or a name, kept on one line


def cell(value: object) -> str:
    """A table cell; short ones (figures, names) do not wrap."""
    text = value if isinstance(value, Html) else e(value)
    short = not isinstance(value, Html) and len(str(value)) <= SHORT_CELL
    return f'<td class="short">{text}</td>' if short else f"<td>{text}</td>"


def slug(text: str) -> str:
    """An id fragment that is safe whatever the profile holds."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def status_badge(status: str) -> Html:
    return Html(f'<span class="badge status-{slug(status)}">{e(status)}</span>')


def table(table_id: str, headers: list[str], rows: Iterable[list[object]], row_classes: list[str] | None = None,
          caption: str | None = None) -> Html:
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = []
    for i, row in enumerate(rows):
        css = row_classes[i] if row_classes and row_classes[i] else ""
        attribute = f' class="{e(css)}"' if css else ""
        body.append(f"<tr{attribute}>" + "".join(cell(v) for v in row) + "</tr>")
    title = f"<caption>{e(caption)}</caption>" if caption else ""
    return Html(f'<table id="{e(table_id)}">{title}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                "</table>")


def facts_table(table_id: str, facts: list[Fact]) -> Html:
    rows = "".join(f"<tr><th scope=\"row\">{e(f.label)}</th><td>{e(f.value)}</td></tr>" for f in facts)
    return Html(f'<table id="{e(table_id)}" class="facts"><tbody>{rows}</tbody></table>')


def not_measured(what: str, how: str) -> Html:
    return Html(f'<p class="not-measured">{e(what)}: not measured. {e(how)}</p>')


def section(section_id: str, title: str, body: str) -> Html:
    return Html(f'<section id="{e(section_id)}"><h2>{e(title)}</h2>{body}</section>')


def paragraph(text: str, css: str = "") -> Html:
    attribute = f' class="{e(css)}"' if css else ""
    return Html(f"<p{attribute}>{e(text)}</p>")


def details(summary: str, body: str, element_id: str = "", css: str = "") -> Html:
    attributes = (f' id="{e(element_id)}"' if element_id else "") + (f' class="{e(css)}"' if css else "")
    return Html(f"<details{attributes}><summary>{e(summary)}</summary>{body}</details>")
